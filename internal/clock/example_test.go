package clock_test

import (
	"fmt"
	"time"

	"github.com/loom-k8s/loom/internal/clock"
)

func ExampleFake() {
	f := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f.AfterFunc(time.Minute, func() { fmt.Println("fired at", f.Now().Format(time.TimeOnly)) })
	f.Step(59 * time.Second)
	fmt.Println("armed:", f.Waiters())
	f.Step(time.Second)
	fmt.Println("armed:", f.Waiters())
	// Output:
	// armed: 1
	// fired at 00:01:00
	// armed: 0
}
