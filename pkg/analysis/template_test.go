package analysis

import (
	"regexp"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	vars := Vars{
		Namespace:      "shop",
		Workload:       "web",
		StableRevision: "web-6c9f",
		CanaryRevision: "web-7d4b",
		CanaryPods:     "web-0|web-1",
		StablePods:     "web-2",
		CanaryAge:      "2m",
		Args:           map[string]string{"code": "5..", "window": "1m"},
	}
	tests := []struct {
		name     string
		template string
		vars     Vars
		want     string
		// wantErr lists substrings the error must contain; empty means no error.
		wantErr []string
	}{
		{
			name:     "every variable",
			template: `{{.Namespace}} {{.Workload}} {{.StableRevision}} {{.CanaryRevision}} {{.CanaryPods}} {{.StablePods}} {{.CanaryAge}} {{.Args.code}}`,
			vars:     vars,
			want:     "shop web web-6c9f web-7d4b web-0|web-1 web-2 2m 5..",
		},
		{
			name: "contract error rate query",
			template: `sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}",code=~"{{ .Args.code }}"}[{{ .Args.window }}]))` +
				` / sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}"}[{{ .Args.window }}]))`,
			vars: vars,
			want: `sum(rate(http_requests_total{namespace="shop",pod=~"web-0|web-1",code=~"5.."}[1m]))` +
				` / sum(rate(http_requests_total{namespace="shop",pod=~"web-0|web-1"}[1m]))`,
		},
		{
			name:     "no template actions is returned unchanged",
			template: `up{job="x"}`,
			vars:     Vars{},
			want:     `up{job="x"}`,
		},
		{
			name:     "empty values render as empty, they are known keys",
			template: `[{{.StablePods}}]`,
			vars:     Vars{},
			want:     `[]`,
		},
		{
			name:     "unknown top-level key is an error naming it",
			template: `{{ .Foo }}`,
			vars:     vars,
			wantErr:  []string{`"Foo"`, "known keys: .Namespace, .Workload", "args: .Args.code, .Args.window"},
		},
		{
			name:     "typo of a field is an error naming it",
			template: `x{namespace="{{ .Namspace }}"}`,
			vars:     vars,
			wantErr:  []string{`"Namspace"`, ".Namespace"},
		},
		{
			name:     "lower-case field is an error",
			template: `{{ .namespace }}`,
			vars:     vars,
			wantErr:  []string{`"namespace"`},
		},
		{
			name:     "missing arg is an error naming it",
			template: `{{ .Args.missing }}`,
			vars:     vars,
			wantErr:  []string{`"missing"`, "args: .Args.code, .Args.window"},
		},
		{
			name:     "missing arg without any args is an error",
			template: `{{ .Args.code }}`,
			vars:     Vars{Namespace: "shop"},
			wantErr:  []string{`"code"`, "no args are defined"},
		},
		{
			name:     "unknown key in a branch that runs is an error",
			template: `{{ if .Namespace }}{{ .Bogus }}{{ end }}`,
			vars:     vars,
			wantErr:  []string{`"Bogus"`},
		},
		{
			name:     "field of a string is an error",
			template: `{{ .Namespace.Name }}`,
			vars:     vars,
			wantErr:  []string{"Name"},
		},
		{
			name:     "canary age bounds a window",
			template: `sum(increase(x{pod=~"{{ .CanaryPods }}"}[{{ .CanaryAge }}]))`,
			vars:     Vars{CanaryPods: "web-0", CanaryAge: "1m30s"},
			want:     `sum(increase(x{pod=~"web-0"}[1m30s]))`,
		},
		{
			name:     "if, variables and the allowed functions",
			template: `{{ $w := index .Args "window" }}{{ if and (ne $w "") (gt (len .CanaryPods) 0) }}rate(x[{{ $w }}]){{ else }}vector(0){{ end }}`,
			vars:     vars,
			want:     `rate(x[1m])`,
		},
		{
			name:     "range is refused: one Rollout could loop the manager",
			template: `{{ range 1000000000 }}{{ .CanaryPods }}{{ end }}`,
			vars:     vars,
			wantErr:  []string{"{{range}} is not allowed"},
		},
		{
			name:     "with is refused",
			template: `{{ with .Args.code }}{{ . }}{{ end }}`,
			vars:     vars,
			wantErr:  []string{"{{with}} is not allowed"},
		},
		{
			name:     "define is refused",
			template: `{{ define "x" }}a{{ end }}b`,
			vars:     vars,
			wantErr:  []string{"{{define}} and {{block}} are not allowed", `"x"`},
		},
		{
			name:     "block is refused",
			template: `{{ block "x" . }}a{{ end }}`,
			vars:     vars,
			wantErr:  []string{"are not allowed"},
		},
		{
			name:     "template is refused",
			template: `{{ template "query" . }}`,
			vars:     vars,
			wantErr:  []string{`{{template "query"}} and {{block}} are not allowed`},
		},
		{
			name:     "printf is refused: its width pads before any limit",
			template: `{{ printf "%0999999999d" 1 }}`,
			vars:     vars,
			wantErr:  []string{`function "printf" is not allowed`, "allowed: index, len"},
		},
		{
			name:     "a refused function inside if is found",
			template: `{{ if .Namespace }}{{ call .Args }}{{ end }}`,
			vars:     vars,
			wantErr:  []string{`function "call" is not allowed`},
		},
		{
			name:     "the rendered query is capped",
			template: strings.Repeat(`{{ .CanaryPods }}`, 200),
			vars:     Vars{CanaryPods: strings.Repeat("web-12345|", 200)},
			wantErr:  []string{"the rendered query is longer than 262144 bytes"},
		},
		{
			name:     "syntax error",
			template: `{{ .Namespace `,
			vars:     vars,
			wantErr:  []string{"parse query template"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Render(tt.template, tt.vars)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Render() = %q, want an error", got)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("Render() error = %q, want it to contain %q", err, want)
					}
				}
				if got != "" {
					t.Errorf("Render() returned %q with an error, want empty", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Render() error = %v", err)
			}
			if got != tt.want {
				t.Errorf("Render() =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestPodRegex(t *testing.T) {
	tests := []struct {
		name      string
		pods      []string
		want      string
		matches   []string
		nonMatch  []string
		noEscapes bool
	}{
		{
			name:     "several pods sorted and joined",
			pods:     []string{"web-1", "web-0"},
			want:     "web-0|web-1",
			matches:  []string{"web-0", "web-1"},
			nonMatch: []string{"web-10", "xweb-0", "web-", "", "web-0|web-1"},
		},
		{
			name:     "duplicates and empty names dropped",
			pods:     []string{"b", "a", "b", ""},
			want:     "a|b",
			matches:  []string{"a", "b"},
			nonMatch: []string{"", "ab"},
		},
		{
			name:      "dots match only a dot and need no backslash",
			pods:      []string{"web.v2-0"},
			want:      "web[.]v2-0",
			matches:   []string{"web.v2-0"},
			nonMatch:  []string{"webxv2-0"},
			noEscapes: true,
		},
		{
			name:     "other metacharacters are quoted",
			pods:     []string{"a+b(c)"},
			want:     `a\+b\(c\)`,
			matches:  []string{"a+b(c)"},
			nonMatch: []string{"aab(c)", "abc"},
		},
		{
			name:     "no pods matches nothing, not even an absent label",
			pods:     nil,
			want:     matchNothing,
			nonMatch: []string{"", "a", "a^", "web-0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PodRegex(tt.pods)
			if got != tt.want {
				t.Fatalf("PodRegex(%q) = %q, want %q", tt.pods, got, tt.want)
			}
			if tt.noEscapes && strings.Contains(got, `\`) {
				t.Errorf("PodRegex(%q) = %q contains a backslash", tt.pods, got)
			}
			// PromQL anchors regex matchers at both ends; do the same here.
			re := regexp.MustCompile("^(?:" + got + ")$")
			for _, s := range tt.matches {
				if !re.MatchString(s) {
					t.Errorf("%q does not match %q", got, s)
				}
			}
			for _, s := range tt.nonMatch {
				if re.MatchString(s) {
					t.Errorf("%q matches %q", got, s)
				}
			}
		})
	}
}

func TestPodRegexDoesNotModifyInput(t *testing.T) {
	pods := []string{"web-1", "web-0", "web-1"}
	PodRegex(pods)
	if strings.Join(pods, ",") != "web-1,web-0,web-1" {
		t.Errorf("PodRegex modified its input: %q", pods)
	}
}
