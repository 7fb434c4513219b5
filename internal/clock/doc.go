// Package clock abstracts time so that time-dependent code can be tested
// without sleeping.
//
// # Use
//
// Code that waits or measures keeps a [Clock] in an unexported field and
// uses [Real] unless its tests set another, through a helper in an
// export_test.go file. Those tests pass a [*Fake] and move time forward
// explicitly with [Fake.Step] or [Fake.Set]; timers and AfterFunc
// callbacks that fall due run during that call, in deadline order, so a
// test observes their effects as soon as Step returns. A test that needs
// none of Fake's extras (such as [Fake.Waiters]) can instead run on
// [Real] in a testing/synctest bubble, where the time package is fake.
//
// # Scope
//
// The package is internal: the packages of this module share it, and
// their tests share [Fake]. Its types must not appear in an exported API
// (an exported field, parameter or result), since users outside the
// module cannot name them; internal/apicheck's test enforces this. Users
// fake time with testing/synctest instead.
package clock
