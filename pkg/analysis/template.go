package analysis

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"
)

// Vars are the values a query template can use.
//
// CanaryPods and StablePods are regular expressions of pod names, normally
// built with PodRegex, meant for a PromQL `pod=~"..."` matcher. CanaryAge
// is a PromQL duration (see CanaryAge) for a window that starts when the
// canary became ready on its revision: rate(x[{{ .CanaryAge }}]).
type Vars struct {
	Namespace      string
	Workload       string
	StableRevision string
	CanaryRevision string
	CanaryPods     string
	StablePods     string
	// Pods is the side being measured: in a compared metric (see
	// pkg/analysis/judge.Sides) the canary's Pods in the canary query and
	// the stable Pods in the stable one, so one query serves both; in a
	// threshold metric the canary's Pods.
	Pods      string
	CanaryAge string
	// CanaryService and StableService are the Services of
	// spec.trafficRouting (empty without it), and RevisionLabel the Pod
	// label they select a revision by, for queries on a mesh's or a
	// Gateway's metrics.
	CanaryService string
	StableService string
	RevisionLabel string
	// Args are free-form values from the metric definition, used as
	// {{ .Args.name }}.
	Args map[string]string
}

// knownKeys lists the top-level template keys, in the order of Vars, for
// error messages.
var knownKeys = []string{"Namespace", "Workload", "StableRevision", "CanaryRevision", "CanaryPods", "StablePods", "Pods", "CanaryAge", "CanaryService", "StableService", "RevisionLabel", "Args"}

// data returns the template data as a map. A map rather than the struct
// itself, because text/template's missingkey=error only applies to map
// lookups: with a struct a typo such as .Namspace would still fail, but
// .Args.missing and .Namspace would then fail in two different ways. With a
// map every unknown key, top-level or under .Args, is reported the same way
// and names the key.
func (v Vars) data() map[string]any {
	args := v.Args
	if args == nil {
		args = map[string]string{}
	}
	return map[string]any{
		"Namespace":      v.Namespace,
		"Workload":       v.Workload,
		"StableRevision": v.StableRevision,
		"CanaryRevision": v.CanaryRevision,
		"CanaryPods":     v.CanaryPods,
		"StablePods":     v.StablePods,
		"Pods":           v.Pods,
		"CanaryAge":      v.CanaryAge,
		"CanaryService":  v.CanaryService,
		"StableService":  v.StableService,
		"RevisionLabel":  v.RevisionLabel,
		"Args":           args,
	}
}

// MaxRenderedQuery caps a rendered query. Pod regexes of a few thousand
// Pods fit; a template built to blow up (repeated .CanaryPods) does not.
const MaxRenderedQuery = 256 << 10

// allowedFuncs are the template functions a query may call: comparisons,
// logic, index (for args with a "-") and len. Everything else text/template
// offers is refused: printf can be asked for a gigabyte of padding before
// any output limit sees it, and a query needs none of the rest.
var allowedFuncs = map[string]bool{
	"index": true, "len": true, "eq": true, "ne": true, "lt": true, "le": true,
	"gt": true, "ge": true, "and": true, "or": true, "not": true,
}

// Render executes queryTemplate (Go text/template syntax) with vars.
//
// Whoever may edit a Rollout writes this template and the manager runs it,
// so only what a query needs is allowed (see CheckTemplate) and the output
// is capped at MaxRenderedQuery.
//
// An unknown key, such as {{ .Foo }} or {{ .Args.missing }}, is an error
// naming the key and listing the known ones: an empty string silently
// substituted into a PromQL selector would match the wrong series (or none)
// and the analysis would judge the wrong thing.
func Render(queryTemplate string, vars Vars) (string, error) {
	tmpl, err := parseTemplate(queryTemplate)
	if err != nil {
		return "", err
	}
	out := &cappedWriter{limit: MaxRenderedQuery}
	if err := tmpl.Execute(out, vars.data()); err != nil {
		if errors.Is(err, errQueryTooLong) {
			return "", fmt.Errorf("render query template: %w", errQueryTooLong)
		}
		return "", fmt.Errorf("render query template: %w (%s)", err, describeKeys(vars.Args))
	}
	return out.String(), nil
}

// CheckTemplate parses a query template and refuses what a query does not
// need, naming the construct: range, with, define, template and block
// (loops and sub-templates that let one Rollout hold a worker or its
// memory) and any function but those in allowedFuncs.
func CheckTemplate(queryTemplate string) error {
	_, err := parseTemplate(queryTemplate)
	return err
}

func parseTemplate(queryTemplate string) (*template.Template, error) {
	tmpl, err := template.New("query").Option("missingkey=error").Parse(queryTemplate)
	if err != nil {
		return nil, fmt.Errorf("parse query template: %w", err)
	}
	for _, t := range tmpl.Templates() {
		if t.Name() != tmpl.Name() {
			return nil, fmt.Errorf("query template: {{define}} and {{block}} are not allowed (found template %q): a query is one expression", t.Name())
		}
	}
	if err := checkNode(tmpl.Root); err != nil {
		return nil, fmt.Errorf("query template: %w", err)
	}
	return tmpl, nil
}

// checkNode walks a template's parse tree.
func checkNode(node parse.Node) error {
	switch n := node.(type) {
	case nil:
		return nil
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := checkNode(c); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		return checkNode(n.Pipe)
	case *parse.IfNode:
		return errors.Join(checkNode(n.Pipe), checkNode(n.List), checkNode(n.ElseList))
	case *parse.PipeNode:
		if n == nil {
			return nil
		}
		for _, cmd := range n.Cmds {
			for _, arg := range cmd.Args {
				if err := checkNode(arg); err != nil {
					return err
				}
			}
		}
	case *parse.ChainNode:
		return checkNode(n.Node)
	case *parse.IdentifierNode:
		if !allowedFuncs[n.Ident] {
			return fmt.Errorf("function %q is not allowed (allowed: index, len, eq, ne, lt, le, gt, ge, and, or, not)", n.Ident)
		}
	case *parse.RangeNode:
		return errors.New("{{range}} is not allowed: a query needs no loop")
	case *parse.WithNode:
		return errors.New("{{with}} is not allowed: write the field, such as {{ .Args.name }}")
	case *parse.TemplateNode:
		return fmt.Errorf("{{template %q}} and {{block}} are not allowed: a query is one expression", n.Name)
	}
	// Text, comments, fields, variables, dot and literals are harmless.
	return nil
}

var errQueryTooLong = fmt.Errorf("the rendered query is longer than %d bytes", MaxRenderedQuery)

// cappedWriter keeps at most limit bytes and fails the write beyond, which
// stops the template's execution.
type cappedWriter struct {
	strings.Builder
	limit int
}

func (w *cappedWriter) Write(p []byte) (int, error) {
	if w.Len()+len(p) > w.limit {
		return 0, errQueryTooLong
	}
	return w.Builder.Write(p)
}

// describeKeys tells the template author what could have been meant.
func describeKeys(args map[string]string) string {
	keys := make([]string, 0, len(knownKeys))
	for _, k := range knownKeys {
		keys = append(keys, "."+k)
	}
	argNames := make([]string, 0, len(args))
	for name := range args {
		argNames = append(argNames, ".Args."+name)
	}
	slices.Sort(argNames)
	if len(argNames) == 0 {
		return "known keys: " + strings.Join(keys, ", ") + "; no args are defined"
	}
	return "known keys: " + strings.Join(keys, ", ") + "; args: " + strings.Join(argNames, ", ")
}

// matchNothing is a regular expression that matches no string, not even the
// empty one. PromQL treats a missing label as the empty string, so an empty
// pod regex (`pod=~""`) would select every series without a pod label; with
// no pods we want no series, and so an empty (Inconclusive) result.
const matchNothing = "a^"

// PodRegex returns a regular expression matching exactly the given pod names,
// for a PromQL `pod=~"..."` matcher (PromQL anchors regexes at both ends, so
// no ^ or $ is added). Names are sorted and deduplicated so that the rendered
// query, and therefore status, does not change with list order. With no names
// the regex matches nothing.
//
// Each name is escaped with regexp.QuoteMeta, except that a dot is written as
// "[.]" instead of "\.": the result then contains no backslash for any valid
// Kubernetes name and can be pasted inside a PromQL double-quoted string,
// where "\." would be rejected as an unknown escape sequence.
func PodRegex(names []string) string {
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	parts := make([]string, 0, len(sorted))
	for _, name := range sorted {
		if name == "" {
			continue
		}
		parts = append(parts, quotePodName(name))
	}
	if len(parts) == 0 {
		return matchNothing
	}
	return strings.Join(parts, "|")
}

func quotePodName(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r == '.' {
			b.WriteString("[.]")
			continue
		}
		b.WriteString(regexp.QuoteMeta(string(r)))
	}
	return b.String()
}
