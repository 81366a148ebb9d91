package main

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func outputsJSON(t *testing.T, outs stackOutputs) string {
	t.Helper()
	b, err := json.Marshal(outs.structured())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFromSecretMasksSecretOutputs(t *testing.T) {
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			v1alpha1.SecretOutputsAnnotation: "token", v1alpha1.JSONOutputsAnnotation: "port",
		}},
		Data: map[string][]byte{"token": []byte("s3cr3t"), "port": []byte("8080"), "name": []byte("8080")},
	}
	if got, want := outputsJSON(t, fromSecret(sec, false)), `{"name":"8080","port":8080,"token":"[secret]"}`; got != want {
		t.Errorf("masked: %s, want %s", got, want)
	}
	if got, want := outputsJSON(t, fromSecret(sec, true)), `{"name":"8080","port":8080,"token":"s3cr3t"}`; got != want {
		t.Errorf("--show-secrets: %s, want %s", got, want)
	}
	// A Secret from a controller that did not annotate: all count as secret.
	sec.Annotations = nil
	if got, want := outputsJSON(t, fromSecret(sec, false)), `{"name":"[secret]","port":"[secret]","token":"[secret]"}`; got != want {
		t.Errorf("unannotated: %s, want %s", got, want)
	}
}

func TestFromConfigMapTypesFromStatus(t *testing.T) {
	s := &v1alpha1.Stack{Status: v1alpha1.StackStatus{Outputs: map[string]string{
		"zip": `"02134"`, "port": "8080", "key": "[secret]", "big": "[omitted: 2 KiB; ...]",
	}}}
	cm := &corev1.ConfigMap{Data: map[string]string{"zip": "02134", "port": "8080", "big": `{"a":1}`, "late": "true"}}
	got := outputsJSON(t, fromConfigMap(cm, s))
	want := `{"big":{"a":1},"key":"[secret]","late":"true","port":8080,"zip":"02134"}`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestOperationsOldestFirst(t *testing.T) {
	s := &v1alpha1.Stack{Status: v1alpha1.StackStatus{
		History:          []v1alpha1.OperationRecord{{ID: "3"}, {ID: "2"}, {ID: "1"}},
		CurrentOperation: &v1alpha1.OperationRecord{ID: "4", Outcome: v1alpha1.OutcomeRunning},
	}}
	var ids string
	for _, op := range operationsOldestFirst(s) {
		ids += op.ID
	}
	if ids != "1234" {
		t.Errorf("order %s, want 1234", ids)
	}
	s.Status.History[0].ID = "4" // the running one recorded already
	ids = ""
	for _, op := range operationsOldestFirst(s) {
		ids += op.ID
	}
	if ids != "124" {
		t.Errorf("order %s, want 124", ids)
	}
}
