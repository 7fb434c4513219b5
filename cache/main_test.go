package cache_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind, such
// as a Pop still waiting after Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
