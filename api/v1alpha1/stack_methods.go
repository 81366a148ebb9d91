package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults applied by the API server (through the CRD's defaults); the getters
// below fall back to them for objects that have not been through it.
const (
	DefaultInterval      = 10 * time.Minute
	DefaultRetryInterval = time.Minute
	DefaultTimeout       = 30 * time.Minute
)

// GetConditions returns the status conditions (conditions.Getter).
func (in *Stack) GetConditions() []metav1.Condition {
	return in.Status.Conditions
}

// SetConditions sets the status conditions (conditions.Setter).
func (in *Stack) SetConditions(conditions []metav1.Condition) {
	in.Status.Conditions = conditions
}

// GetRequeueAfter returns spec.interval, the time to the next regular reconcile.
func (in *Stack) GetRequeueAfter() time.Duration {
	if in.Spec.Interval.Duration <= 0 {
		return DefaultInterval
	}
	return in.Spec.Interval.Duration
}

// GetRetryInterval returns spec.retryInterval, the base of the failure backoff.
func (in *Stack) GetRetryInterval() time.Duration {
	if in.Spec.RetryInterval == nil || in.Spec.RetryInterval.Duration <= 0 {
		return DefaultRetryInterval
	}
	return in.Spec.RetryInterval.Duration
}

// GetTimeout returns spec.timeout, the bound on one operation.
func (in *Stack) GetTimeout() time.Duration {
	if in.Spec.Timeout == nil || in.Spec.Timeout.Duration <= 0 {
		return DefaultTimeout
	}
	return in.Spec.Timeout.Duration
}

// GetStackName returns spec.stackName, or metadata.name when it is empty.
func (in *Stack) GetStackName() string {
	if in.Spec.StackName != "" {
		return in.Spec.StackName
	}
	return in.Name
}

// GetKey returns the Secret key, or DefaultPassphraseKey when it is empty.
func (in *SecretKeyRef) GetKey() string {
	if in.Key == "" {
		return DefaultPassphraseKey
	}
	return in.Key
}

// PushHistory puts rec first in status.history and drops the oldest records
// past MaxHistory.
func (in *StackStatus) PushHistory(rec OperationRecord) {
	n := min(len(in.History)+1, MaxHistory)
	h := make([]OperationRecord, 0, n)
	h = append(h, rec)
	h = append(h, in.History[:n-1]...)
	in.History = h
}

// DefaultDriftInterval is spec.driftDetection.interval when it is not set.
const DefaultDriftInterval = time.Hour

// GetDriftMode is spec.driftDetection.mode, Detect when not set.
func (in *Stack) GetDriftMode() DriftMode {
	if d := in.Spec.DriftDetection; d != nil && d.Mode != "" {
		return d.Mode
	}
	return DriftDetect
}

// GetDriftInterval is spec.driftDetection.interval, an hour when not set.
func (in *Stack) GetDriftInterval() time.Duration {
	if d := in.Spec.DriftDetection; d != nil && d.Interval != nil && d.Interval.Duration > 0 {
		return d.Interval.Duration
	}
	return DefaultDriftInterval
}

// GetDriftIgnore is spec.driftDetection.ignore.
func (in *Stack) GetDriftIgnore() []DriftIgnoreRule {
	if d := in.Spec.DriftDetection; d != nil {
		return d.Ignore
	}
	return nil
}

// GetApprovalMode is spec.approval.mode, Auto when not set.
func (in *Stack) GetApprovalMode() ApprovalMode {
	if a := in.Spec.Approval; a != nil && a.Mode != "" {
		return a.Mode
	}
	return ApprovalAuto
}

// RollbackAfter is how many failed ups of a new change make a rollback; 0
// when spec.rollback is off.
func (in *Stack) RollbackAfter() int64 {
	r := in.Spec.Rollback
	if r == nil || !r.Enabled {
		return 0
	}
	if r.AfterFailures < 1 {
		return 1
	}
	return int64(r.AfterFailures)
}

// Namespaced is ref's key, in namespace ns when ref names none.
func (in DependencyReference) Namespaced(ns string) (namespace, name string) {
	if in.Namespace != "" {
		ns = in.Namespace
	}
	return ns, in.Name
}
