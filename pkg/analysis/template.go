package analysis

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/template"
)

// Vars are the values a query template can use.
//
// CanaryPods and StablePods are regular expressions of pod names, normally
// built with PodRegex, meant for a PromQL `pod=~"..."` matcher.
type Vars struct {
	Namespace      string
	Workload       string
	StableRevision string
	CanaryRevision string
	CanaryPods     string
	StablePods     string
	// Args are free-form values from the metric definition, used as
	// {{ .Args.name }}.
	Args map[string]string
}

// knownKeys lists the top-level template keys, in the order of Vars, for
// error messages.
var knownKeys = []string{"Namespace", "Workload", "StableRevision", "CanaryRevision", "CanaryPods", "StablePods", "Args"}

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
		"Args":           args,
	}
}

// Render executes queryTemplate (Go text/template syntax) with vars.
//
// An unknown key, such as {{ .Foo }} or {{ .Args.missing }}, is an error
// naming the key and listing the known ones: an empty string silently
// substituted into a PromQL selector would match the wrong series (or none)
// and the analysis would judge the wrong thing.
func Render(queryTemplate string, vars Vars) (string, error) {
	tmpl, err := template.New("query").Option("missingkey=error").Parse(queryTemplate)
	if err != nil {
		return "", fmt.Errorf("parse query template: %w", err)
	}
	var out strings.Builder
	if err := tmpl.Execute(&out, vars.data()); err != nil {
		return "", fmt.Errorf("render query template: %w (%s)", err, describeKeys(vars.Args))
	}
	return out.String(), nil
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
