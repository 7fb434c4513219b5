// Package queuetest checks that an implementation of
// [workqueue.Interface] keeps the guarantees the workqueue package
// documents. It plays the role testing/slogtest plays for slog handlers.
//
// # Conformance cases
//
// [Check] runs a table of small deterministic scenarios (FIFO order,
// deduplication, re-queue after Done, shutdown, drain) and returns every
// violation, each naming the rule it breaks, joined with errors.Join.
// [Run] does the same as subtests of a *testing.T. [CheckDelaying] and
// [RunDelaying] add the AddAfter rules for a [workqueue.DelayingInterface]
// driven by a clock the caller advances, and [CheckPriority] and
// [RunPriority] the rules of a [workqueue.PriorityInterface] on top
// (higher priority first, FIFO within one, raising never lowering, the
// priority kept through delays, re-adds and rate-limited retries). A
// queue on the real clock, such as [workqueue.Queue], is checked with
// CheckDelaying or CheckPriority in a testing/synctest bubble, where
// advancing means time.Sleep followed by synctest.Wait.
//
// # Property test
//
// [Stress] runs many random operation sequences from many goroutines
// against fresh queues and checks the invariants as it goes: no item is
// processed by two workers at once, no Add is lost, a Get is never
// handed more copies of an item than were added, and ShutDownWithDrain
// returns only after the items processing when it was called are Done.
// Run it under the race detector.
package queuetest
