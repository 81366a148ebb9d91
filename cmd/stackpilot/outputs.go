package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// secretMask stands for a secret output's value, as in status.outputs.
const secretMask = "[secret]"

func (c *cli) newOutputsCmd() *cobra.Command {
	var output string
	var showSecrets bool
	cmd := &cobra.Command{
		Use:   "outputs STACK",
		Short: "Print a Stack's outputs, secret ones only with --show-secrets",
		Long: `Prints the outputs of the Stack's last successful up, like ` + "`pulumi stack output`" + `,
from the objects the controller publishes them to (spec.outputs): the
ConfigMap holds the outputs that are not secret, the Secret all of them.

Secret outputs print as [secret] unless --show-secrets is given; then every
value is read from the outputs Secret, which needs get on that Secret: a
caller who may not read it is told so, and the command fails rather than
print less. Without --show-secrets it reads the ConfigMap (else the Secret,
masking the secret values, else status.outputs), so get on configmaps is
enough.

A Stack without spec.outputs has only status.outputs, bounded (long values
are omitted there): those are printed, with a note on stderr.

-o json|yaml prints an object of name to value, strings as strings and
structured outputs as JSON, like ` + "`pulumi stack output --json`" + `.`,
		Example: `  stackpilot outputs web -n infra
  stackpilot outputs web -o json | jq -r .url
  stackpilot outputs web --show-secrets -o json`,
		Args:              exactArgs(1, "one Stack name"),
		ValidArgsFunction: c.completeStacks,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := outputFormat(output)
			if err != nil {
				return err
			}
			return c.withStack(args[0], func(ctx context.Context, g *stackGetter, s *v1alpha1.Stack) error {
				outs, err := c.readOutputs(ctx, g.cl, s, showSecrets)
				if err != nil {
					return err
				}
				return printList(c.stdout, format, outs.structured(), func() error {
					if len(outs) == 0 {
						c.infof("Stack %s/%s has no outputs.", s.Namespace, s.Name)
						return nil
					}
					t := newTable(c.stdout, "NAME", "VALUE")
					for _, o := range outs {
						t.row(o.name, o.text)
					}
					return t.flush()
				})
			})
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().BoolVar(&showSecrets, "show-secrets", false, "Print secret values too (needs get on the outputs Secret).")
	return cmd
}

// stackOutput is one output: its text (a string as it is, anything else as
// compact JSON, or the mask) and whether that text is JSON.
type stackOutput struct {
	name, text string
	json       bool
}

type stackOutputs []stackOutput

// structured is name to value, for -o json|yaml.
func (outs stackOutputs) structured() map[string]any {
	m := make(map[string]any, len(outs))
	for _, o := range outs {
		if o.json && json.Valid([]byte(o.text)) {
			m[o.name] = json.RawMessage(o.text)
		} else {
			m[o.name] = o.text
		}
	}
	return m
}

func (c *cli) readOutputs(ctx context.Context, cl client.Client, s *v1alpha1.Stack, showSecrets bool) (stackOutputs, error) {
	target := s.Spec.Outputs
	if target == nil || (target.SecretName == "" && target.ConfigMapName == "") {
		if showSecrets {
			return nil, fmt.Errorf("the Stack %s/%s publishes no outputs Secret (spec.outputs.secretName), so its secret values are only in its Pulumi state: set spec.outputs.secretName, or run `pulumi stack output --show-secrets` against its backend", s.Namespace, s.Name)
		}
		c.infof("Stack %s/%s has no spec.outputs: these are status.outputs, where values over 1 KiB are omitted.", s.Namespace, s.Name)
		return fromStatus(s), nil
	}
	if showSecrets {
		if target.SecretName == "" {
			return nil, fmt.Errorf("the Stack %s/%s publishes its outputs to ConfigMap %s only, without the secret ones: set spec.outputs.secretName to publish them to a Secret", s.Namespace, s.Name, target.ConfigMapName)
		}
		sec, err := readOutputsObject[*corev1.Secret](ctx, cl, s, "Secret", target.SecretName, &corev1.Secret{})
		if err != nil {
			return nil, err
		}
		return fromSecret(sec, true), nil
	}
	if target.ConfigMapName != "" {
		cm, err := readOutputsObject[*corev1.ConfigMap](ctx, cl, s, "ConfigMap", target.ConfigMapName, &corev1.ConfigMap{})
		if err != nil {
			return nil, err
		}
		return fromConfigMap(cm, s), nil
	}
	sec, err := readOutputsObject[*corev1.Secret](ctx, cl, s, "Secret", target.SecretName, &corev1.Secret{})
	if err != nil {
		if !apierrors.IsForbidden(unwrapAPI(err)) {
			return nil, err
		}
		c.infof("Not allowed to read the outputs Secret %s: these are status.outputs, where values over 1 KiB are omitted.", target.SecretName)
		return fromStatus(s), nil
	}
	return fromSecret(sec, false), nil
}

// apiErr keeps the API error under a message that says what to do.
type apiErr struct {
	msg string
	err error
}

func (e *apiErr) Error() string { return e.msg }
func (e *apiErr) Unwrap() error { return e.err }

func unwrapAPI(err error) error {
	if e, ok := err.(*apiErr); ok {
		return e.err
	}
	return err
}

// readOutputsObject reads the outputs Secret or ConfigMap, explaining a
// refusal and an object not published yet.
func readOutputsObject[T client.Object](ctx context.Context, cl client.Client, s *v1alpha1.Stack, kind, name string, obj T) (T, error) {
	err := cl.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, obj)
	switch {
	case err == nil:
		return obj, nil
	case apierrors.IsForbidden(err):
		what := "the outputs"
		if kind == "Secret" {
			what = "secret outputs"
		}
		return obj, &apiErr{fmt.Sprintf("you may not read the outputs %s %s in namespace %s, so %s cannot be shown: ask for get on %ss there, or run without --show-secrets to see the outputs that are not secret",
			kind, name, s.Namespace, what, strings.ToLower(kind)), err}
	case apierrors.IsNotFound(err):
		why := "the Stack has applied nothing yet"
		if cond := apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.OutputsPublishedCondition); cond != nil {
			why = fmt.Sprintf("OutputsPublished is %s (%s): %s", cond.Status, cond.Reason, cond.Message)
		}
		return obj, &apiErr{fmt.Sprintf("the outputs %s %s does not exist in namespace %s: %s", kind, name, s.Namespace, why), err}
	}
	return obj, fmt.Errorf("reading the outputs %s %s in namespace %s: %w", kind, name, s.Namespace, err)
}

// fromSecret reads every output from the Secret, the controller's
// annotations telling which are secret and which are JSON.
func fromSecret(sec *corev1.Secret, showSecrets bool) stackOutputs {
	secret, known := annotationSet(sec.Annotations, v1alpha1.SecretOutputsAnnotation)
	jsonOut, _ := annotationSet(sec.Annotations, v1alpha1.JSONOutputsAnnotation)
	var outs stackOutputs
	for k, v := range sec.Data {
		// Without the annotation (an older controller) every output counts as secret.
		if !showSecrets && (secret[k] || !known) {
			outs = append(outs, stackOutput{name: k, text: secretMask})
			continue
		}
		outs = append(outs, stackOutput{name: k, text: string(v), json: jsonOut[k]})
	}
	return sortOutputs(outs)
}

// fromConfigMap reads the outputs that are not secret from the ConfigMap
// and adds the secret ones, masked, from status.outputs. Which values are
// JSON, status.outputs tells (it holds every value as JSON text).
func fromConfigMap(cm *corev1.ConfigMap, s *v1alpha1.Stack) stackOutputs {
	var outs stackOutputs
	for k, v := range cm.Data {
		st, inStatus := s.Status.Outputs[k]
		isJSON := !inStatus || !strings.HasPrefix(st, `"`)
		if !inStatus || strings.HasPrefix(st, "[omitted") {
			// Unknown: JSON only if it reads as a structured value.
			isJSON = json.Valid([]byte(v)) && strings.ContainsAny(v[:min(1, len(v))], "{[")
		}
		outs = append(outs, stackOutput{name: k, text: v, json: isJSON})
	}
	for k, v := range s.Status.Outputs {
		if _, public := cm.Data[k]; !public && v == secretMask {
			outs = append(outs, stackOutput{name: k, text: secretMask})
		}
	}
	return sortOutputs(outs)
}

// fromStatus reads status.outputs: JSON text, the mask, or an omission note.
func fromStatus(s *v1alpha1.Stack) stackOutputs { return outputsText(s.Status.Outputs) }

// outputsText reads values as status.outputs holds them: strings as JSON
// text are unquoted, so that they print as the outputs verb prints them.
func outputsText(status map[string]string) stackOutputs {
	var outs stackOutputs
	for k, v := range status {
		isJSON := json.Valid([]byte(v))
		if isJSON && strings.HasPrefix(v, `"`) {
			var str string
			_ = json.Unmarshal([]byte(v), &str)
			outs = append(outs, stackOutput{name: k, text: str})
			continue
		}
		outs = append(outs, stackOutput{name: k, text: v, json: isJSON})
	}
	return sortOutputs(outs)
}

func annotationSet(ann map[string]string, key string) (map[string]bool, bool) {
	v, ok := ann[key]
	set := map[string]bool{}
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			set[n] = true
		}
	}
	return set, ok
}

func sortOutputs(outs stackOutputs) stackOutputs {
	sort.Slice(outs, func(i, j int) bool { return outs[i].name < outs[j].name })
	if outs == nil {
		outs = stackOutputs{}
	}
	return outs
}
