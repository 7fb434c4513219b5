// Package leaderelection lets one of several replicas of a program act as
// the leader, using a coordination.k8s.io/v1 Lease as the lock.
//
// # Getting started
//
//	leases, _ := client.For[coordinationv1.Lease](rc, client.Options{})
//	e, err := leaderelection.New(leases, leaderelection.Options{
//		Namespace: "kube-system", Name: "my-controller",
//		OnStartedLeading: func(ctx context.Context) { runControllers(ctx) },
//	})
//	err = e.Run(ctx) // returns when ctx ends or leadership is lost
//
// # How it works
//
// Every RetryPeriod each candidate reads the Lease, and once more at the
// moment the holder's Lease expires by its clock, if that comes sooner.
// If nobody holds it, or the holder has not renewed it for LeaseDuration
// (counted from when this candidate saw the renewal), the candidate writes
// itself in as holder; the write is conditional on the Lease's
// resourceVersion, so of several candidates exactly one succeeds. The
// leader renews every RetryPeriod. When it cannot renew for RenewDeadline
// it stops leading at once: its fence closes (see below),
// OnStartedLeading's context is cancelled, OnStoppedLeading is called and
// Run returns ErrLeadershipLost, without waiting for OnStartedLeading's
// work to return.
//
// # Fencing
//
// A goroutine cannot be stopped from outside, so work that ignores its
// context could go on writing after another replica has taken over. The
// context given to OnStartedLeading therefore carries the Elector as a
// rest.Fence: every write (POST, PUT, PATCH, DELETE) sent with it, or with
// any context derived from it (context.WithoutCancel included), is refused
// with rest.ErrFenced and ErrLeadershipLost once leadership has ended, and
// a write under way is cancelled when the renew deadline passes. Only
// writes sent with an unrelated context, such as context.Background(),
// escape the fence.
//
// # Clocks and safety
//
// Expiry is judged by each candidate's own clock, from the moment it last
// saw the Lease change, not from the times written in the Lease: clocks of
// different machines need not agree. What must hold is that clocks run at
// about the same rate, and that RenewDeadline is shorter than
// LeaseDuration: a leader that cannot renew stops writing at most
// RenewDeadline after it sent its last successful renewal, while the
// others wait LeaseDuration from the last change they saw before taking
// over. With the defaults (15 s, 10 s, 2 s) that leaves 5 s of margin for
// a write the leader sent in time to reach the server. A process that is
// paused (SIGSTOP, a frozen VM) and resumed after the Lease passed on
// finds its fence closed: its writes are refused before they are sent.
// What no client-side fence can stop is a write that passed its last
// check in time and was then held up for longer than the margin: in the
// network, or by a pause that struck between the check and the socket.
// The last check is made as late as the client can: for a write with a
// body, just before the transport sends the body's last byte, since the
// server does nothing with a request it has not received whole. Keep the
// margin large.
//
// # Release on cancel
//
// When Run's context ends, the leader cancels its work, waits up to
// RenewDeadline for it to return, closes its fence, waits for writes under
// way to end, and then releases the Lease (clears the holder), so another
// replica takes over within a RetryPeriod instead of a LeaseDuration.
// KeepOnCancel turns the release off.
package leaderelection
