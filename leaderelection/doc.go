// Package leaderelection lets one of several replicas of a program act as
// the leader, using a coordination.k8s.io/v1 Lease as the lock.
//
// # Getting started
//
//	leases, _ := client.For[coordinationv1.Lease](ctx, rc, client.Options{})
//	e, err := leaderelection.New(leases, leaderelection.Options{
//		Namespace: "kube-system", Name: "my-controller",
//		OnStartedLeading: func(ctx context.Context) { runControllers(ctx) },
//	})
//	err = e.Run(ctx) // returns when ctx ends or leadership is lost
//
// # How it works
//
// Every RetryPeriod each candidate reads the Lease. If nobody holds it, or
// the holder has not renewed it for LeaseDuration, the candidate writes
// itself in as holder; the write is conditional on the Lease's
// resourceVersion, so of several candidates exactly one succeeds. The
// leader renews every RetryPeriod. When it cannot renew for RenewDeadline
// it stops leading: OnStartedLeading's context is cancelled, Run waits for
// OnStartedLeading to return, calls OnStoppedLeading and returns
// ErrLeadershipLost.
//
// # Clocks and safety
//
// Expiry is judged by each candidate's own clock, from the moment it last
// saw the Lease change, not from the times written in the Lease: clocks of
// different machines need not agree. What must hold is that clocks run at
// about the same rate, and that RenewDeadline (plus the time the leader's
// work takes to stop) is shorter than LeaseDuration: a leader that cannot
// renew gives up after RenewDeadline, while the others wait LeaseDuration
// from the last change they saw before taking over. With the defaults
// (15 s, 10 s, 2 s) that leaves 5 s of margin. Work that must never run
// twice at once has to stop within that margin when its context is
// cancelled.
//
// # Release on cancel
//
// When Run's context ends, the leader stops its work and then releases
// the Lease (clears the holder), so another replica takes over within a
// RetryPeriod instead of a LeaseDuration. KeepOnCancel turns that off.
package leaderelection
