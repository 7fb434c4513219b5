package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/examples/at/api/v1alpha1"
)

// Schedule is a point in time, in parts.
type Schedule struct {
	// Date is the day, YYYY-MM-DD.
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`
	Date string `json:"date"`
	// Time is the time of day, HH:MM:SS with an optional fraction of a
	// second.
	// +kubebuilder:validation:Pattern=`^[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?$`
	Time string `json:"time"`
	// Offset from UTC: "Z" (UTC) or ±HH:MM. Default "Z".
	// +kubebuilder:validation:Pattern=`^(Z|[+-][0-9]{2}:[0-9]{2})$`
	// +kubebuilder:default=Z
	// +optional
	Offset string `json:"offset,omitempty"`
}

// AtSpec says what to run and when.
type AtSpec struct {
	// Schedule is when to run the command.
	Schedule Schedule `json:"schedule"`
	// Command is run with `sh -c`. The operator's defaulting webhook fills
	// it in when empty.
	// +optional
	Command string `json:"command,omitempty"`
	// Image runs the command. Default busybox:1.37.
	// +kubebuilder:default="busybox:1.37"
	// +optional
	Image string `json:"image,omitempty"`
}

// At runs a command once, at a scheduled time.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=cnat
// +kubebuilder:printcolumn:name="Date",type=string,JSONPath=`.spec.schedule.date`
// +kubebuilder:printcolumn:name="Time",type=string,JSONPath=`.spec.schedule.time`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type At struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AtSpec            `json:"spec,omitempty"`
	Status v1alpha1.AtStatus `json:"status,omitempty"`
}

// AtList is a list of At.
//
// +kubebuilder:object:root=true
type AtList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []At `json:"items"`
}
