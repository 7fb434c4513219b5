package operator

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/loom-k8s/loom/examples/at/api/v1alpha1"
)

// step is what one reconcile does, decided by plan from the At, its Pod
// and the time alone: the rest of the reconciler only carries it out.
type step struct {
	phase     v1alpha1.Phase // the next phase; "" keeps the current one
	createPod bool
	requeue   time.Duration // reconcile again after this long; 0: on the next change
	succeeded *bool         // the Succeeded condition to record, when DONE
	eventType string        // an event to record once the step is written
	reason    string
	note      string
}

// plan decides the next step of at. pod is the At's Pod, or nil when there
// is none (yet). It fails only for a schedule that does not parse, which no
// retry can fix.
func plan(at *v1alpha1.At, pod *corev1.Pod, now time.Time) (step, error) {
	switch at.Status.Phase {
	case "":
		return step{phase: v1alpha1.PhasePending, eventType: corev1.EventTypeNormal, reason: "Pending",
			note: "waiting until " + at.Spec.Schedule}, nil
	case v1alpha1.PhasePending:
		when, err := time.Parse(time.RFC3339, at.Spec.Schedule)
		if err != nil {
			return step{}, fmt.Errorf("schedule %q is not an RFC 3339 time: %w", at.Spec.Schedule, err)
		}
		if d := when.Sub(now); d > 0 {
			return step{requeue: d}, nil // a timer, not polling
		}
		return step{phase: v1alpha1.PhaseRunning, createPod: pod == nil, eventType: corev1.EventTypeNormal,
			reason: "Running", note: "running the command in pod " + podName(at)}, nil
	case v1alpha1.PhaseRunning:
		if pod == nil {
			// Deleted by someone, or not in the cache yet: (re)create it;
			// AlreadyExists means the cache was behind.
			return step{createPod: true}, nil
		}
		switch pod.Status.Phase {
		case corev1.PodSucceeded:
			ok := true
			return step{phase: v1alpha1.PhaseDone, succeeded: &ok, eventType: corev1.EventTypeNormal,
				reason: "Done", note: "the command finished"}, nil
		case corev1.PodFailed:
			ok := false
			return step{phase: v1alpha1.PhaseDone, succeeded: &ok, eventType: corev1.EventTypeWarning,
				reason: "Failed", note: "the command failed: " + podMessage(pod)}, nil
		}
		return step{}, nil // the Pod's next change brings us back
	default: // DONE
		return step{}, nil
	}
}

// podName is the name of the Pod that runs at's command. A fixed name makes
// a second create fail with AlreadyExists instead of starting the command
// twice when the cache is behind.
func podName(at *v1alpha1.At) string { return at.Name + "-pod" }

func podMessage(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			return fmt.Sprintf("exit code %d (%s)", t.ExitCode, t.Reason)
		}
	}
	if pod.Status.Message != "" {
		return pod.Status.Message
	}
	return "pod phase Failed"
}
