package manager

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestCheckNamespaces(t *testing.T) {
	for _, tt := range []struct {
		name    string
		in      []string
		want    []string
		wantErr string
	}{
		{name: "none watches every namespace", in: nil, want: nil},
		{name: "kept in order", in: []string{"team-b", "team-a"}, want: []string{"team-b", "team-a"}},
		{name: "a repeat is dropped", in: []string{"team-a", "team-b", "team-a"}, want: []string{"team-a", "team-b"}},
		{name: "not a namespace name", in: []string{"team-a", "Team_B"}, wantErr: `--watch-namespaces: "Team_B" is not a namespace name`},
		{name: "a label selector is not a name", in: []string{"team=a"}, wantErr: `"team=a" is not a namespace name`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checkNamespaces(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("got %v (%v), want %v", got, err, tt.want)
			}
		})
	}
}

// recordingReader answers every read with nothing and records it: what
// reaches it would have reached the API server.
type recordingReader struct{ calls []string }

func (r *recordingReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.calls = append(r.calls, "get "+key.String())
	return nil
}

func (r *recordingReader) List(_ context.Context, _ client.ObjectList, opts ...client.ListOption) error {
	r.calls = append(r.calls, "list "+listNamespace(opts))
	return nil
}

// With watched namespaces, a Secret or ConfigMap of another namespace (or
// of every namespace) is refused before the read leaves the manager, in
// any of the shapes a controller may ask for it; other kinds, and any
// kind in a watched namespace, pass.
func TestScopedReaderKeepsSecretsAndConfigMapsInTheWatchedNamespaces(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	meta := func(kind string) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
		return m
	}
	list := func(kind string) *unstructured.UnstructuredList {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
		return l
	}
	type read struct {
		name    string
		do      func(client.Reader) error
		refused string
	}
	get := func(obj client.Object, ns string) func(client.Reader) error {
		return func(r client.Reader) error {
			return r.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "token"}, obj)
		}
	}
	lister := func(l client.ObjectList, opts ...client.ListOption) func(client.Reader) error {
		return func(r client.Reader) error { return r.List(context.Background(), l, opts...) }
	}
	reads := []read{
		{"a Secret of a watched namespace", get(&corev1.Secret{}, "team-a"), ""},
		{"a ConfigMap of a watched namespace", get(&corev1.ConfigMap{}, "team-b"), ""},
		{"a Secret of another namespace", get(&corev1.Secret{}, "other"), "reading Secret other/token: the manager reads Secrets and ConfigMaps only in the namespaces it watches (--watch-namespaces=team-a,team-b)"},
		{"a ConfigMap of another namespace", get(&corev1.ConfigMap{}, "other"), "reading ConfigMap other/token"},
		{"a Secret's metadata of another namespace", get(meta("Secret"), "other"), "reading Secret other/token"},
		{"the Secrets of another namespace", lister(&corev1.SecretList{}, client.InNamespace("other")), "reading the Secrets of namespace other"},
		{"the Secrets of every namespace", lister(&corev1.SecretList{}), "reading the Secrets of every namespace"},
		{"the ConfigMaps of another namespace, unstructured", lister(list("ConfigMapList"), client.InNamespace("other")), "reading the ConfigMaps of namespace other"},
		{"the Secrets of a watched namespace", lister(&corev1.SecretList{}, client.InNamespace("team-a")), ""},
		{"a Pod of another namespace", get(&corev1.Pod{}, "other"), ""},
		{"a CloneSet of another namespace", get(&stepwisev1.CloneSet{}, "other"), ""},
	}
	for _, tt := range reads {
		t.Run(tt.name, func(t *testing.T) {
			inner := &recordingReader{}
			scoped := &scopedReader{Reader: inner, scope: readScope{namespaces: []string{"team-a", "team-b"}, scheme: scheme}}
			err := tt.do(scoped)
			switch {
			case tt.refused == "" && (err != nil || len(inner.calls) != 1):
				t.Errorf("refused or not passed on: %v, calls %v", err, inner.calls)
			case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)):
				t.Errorf("error %v, want one containing %q", err, tt.refused)
			case tt.refused != "" && len(inner.calls) > 0:
				t.Errorf("refused, yet read: %v", inner.calls)
			}
			// Without watched namespaces every read passes.
			open := &recordingReader{}
			if err := tt.do(&scopedReader{Reader: open, scope: readScope{scheme: scheme}}); err != nil || len(open.calls) != 1 {
				t.Errorf("watching every namespace: %v, calls %v", err, open.calls)
			}
		})
	}
}

// recordingClient is recordingReader as a client; nothing else is called.
type recordingClient struct {
	client.Client
	reads recordingReader
}

func (c *recordingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.reads.Get(ctx, key, obj, opts...)
}

func (c *recordingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.reads.List(ctx, list, opts...)
}

// The controllers' client keeps the same rule as their API reader.
func TestScopedClientKeepsSecretsInTheWatchedNamespaces(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	inner := &recordingClient{}
	c := &scopedClient{Client: inner, scope: readScope{namespaces: []string{"team-a"}, scheme: scheme}}
	ctx := context.Background()
	if err := c.Get(ctx, client.ObjectKey{Namespace: "other", Name: "token"}, &corev1.Secret{}); err == nil {
		t.Error("a Secret of another namespace was read")
	}
	if err := c.List(ctx, &corev1.ConfigMapList{}); err == nil {
		t.Error("the ConfigMaps of every namespace were listed")
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "token"}, &corev1.Secret{}); err != nil {
		t.Error(err)
	}
	if err := c.List(ctx, &corev1.PodList{}, client.InNamespace("other")); err != nil {
		t.Error(err)
	}
	if want := []string{"get team-a/token", "list other"}; !slices.Equal(inner.reads.calls, want) {
		t.Errorf("reads passed on %v, want %v", inner.reads.calls, want)
	}
}
