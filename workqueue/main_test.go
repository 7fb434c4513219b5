package workqueue_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind, such
// as a timer callback or a blocked worker after ShutDown.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
