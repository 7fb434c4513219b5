package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FooSpec says which Deployment a Foo wants, and how big.
type FooSpec struct {
	// DeploymentName names the Deployment, in the Foo's namespace, that
	// the operator creates and owns for this Foo. It cannot change: the
	// Deployment made under the old name would be left behind.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="deploymentName is immutable"
	DeploymentName string `json:"deploymentName"`
	// Replicas is the number of Pods the Deployment runs, 0 to 100.
	// Default 1. It is the scale subresource's spec.replicas.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=1
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
}

// FooStatus is what the operator observed.
type FooStatus struct {
	// AvailableReplicas is the Deployment's status.availableReplicas. It is
	// the scale subresource's status.replicas.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas"`
	// Selector selects the Deployment's Pods, in the string form of a
	// label selector; the scale subresource's status.selector, which a
	// HorizontalPodAutoscaler needs.
	// +optional
	Selector string `json:"selector,omitempty"`
	// Conditions: Ready is True when the Deployment has all its replicas
	// available, False with a reason otherwise (DeploymentNameConflict
	// when the name is taken by a Deployment that is not this Foo's).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Foo asks for a Deployment of a given name and number of replicas.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.availableReplicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=fo,categories=samples
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, experimental-only; samplecontroller.k8s.io is a protected group, used here as kubernetes/sample-controller does"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="the name is the value of the Pods' controller label: at most 63 characters"
// +kubebuilder:printcolumn:name="Deployment",type=string,JSONPath=`.spec.deploymentName`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Foo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   FooSpec   `json:"spec"`
	Status FooStatus `json:"status,omitempty"`
}

// FooList is a list of Foo.
//
// +kubebuilder:object:root=true
type FooList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Foo `json:"items"`
}
