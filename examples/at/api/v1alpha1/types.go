package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Phase is where an At is in its life.
// +kubebuilder:validation:Enum=PENDING;RUNNING;DONE
type Phase string

const (
	// PhasePending: waiting for the schedule.
	PhasePending Phase = "PENDING"
	// PhaseRunning: the Pod runs the command.
	PhaseRunning Phase = "RUNNING"
	// PhaseDone: the Pod finished (see the Succeeded condition for how).
	PhaseDone Phase = "DONE"
)

// AtSpec says what to run and when.
type AtSpec struct {
	// Schedule is when to run the command, in RFC 3339, such as
	// "2026-11-22T15:04:05Z".
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$`
	Schedule string `json:"schedule"`
	// Command is run with `sh -c`. The operator's defaulting webhook fills
	// it in when empty.
	// +optional
	Command string `json:"command,omitempty"`
	// Image runs the command. Default busybox:1.37.
	// +kubebuilder:default="busybox:1.37"
	// +optional
	Image string `json:"image,omitempty"`
}

// AtStatus is what the operator observed.
type AtStatus struct {
	// Phase moves PENDING → RUNNING → DONE.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// PodName names the Pod that runs the command, once created.
	// +optional
	PodName string `json:"podName,omitempty"`
	// Conditions: Succeeded (True or False) once DONE.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// At runs a command once, at a scheduled time.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=cnat
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Command",type=string,JSONPath=`.spec.command`,priority=1
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.status.podName`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type At struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AtSpec   `json:"spec,omitempty"`
	Status AtStatus `json:"status,omitempty"`
}

// AtList is a list of At.
//
// +kubebuilder:object:root=true
type AtList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []At `json:"items"`
}
