// Package clock abstracts time so that time-dependent code can be tested
// without sleeping.
//
// # Use
//
// Code that waits or measures takes a [Clock] in its options and treats a
// nil value as [Real] (see [OrReal]). Tests pass a [*Fake] instead and
// move time forward explicitly with [Fake.Step] or [Fake.Set]; timers and
// AfterFunc callbacks that fall due run during that call, in deadline
// order, so a test observes their effects as soon as Step returns.
//
// # Scope
//
// The package is internal: the packages of this module share it (the
// workqueue, and later backoff, resync and leader election), and their
// tests share [Fake]. It is not part of the public API.
package clock
