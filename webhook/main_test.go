package webhook_test

import (
	"testing"

	"github.com/loom-k8s/loom/testenv"
)

var shared = testenv.Shared{}

func TestMain(m *testing.M) { shared.Main(m) }
