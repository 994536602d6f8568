package config_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// TestSecurityDocTablesTheClusterRole: docs/security.md's RBAC table, which
// is written by hand, grants what the generated ClusterRole grants, row by
// row: a marker that changes the role must change the doc too. A resource
// cell names "`group` `resource`", or "`resource`" for the core group,
// several separated by commas; the verbs cell names the verbs.
func TestSecurityDocTablesTheClusterRole(t *testing.T) {
	role := generatedClusterRole(t)
	documented := documentedGrants(t, filepath.Join("..", "docs", "security.md"))
	if got := grantsOf(role.Rules); !equalGrants(documented, got) {
		t.Errorf("docs/security.md's RBAC table grants\n  %v\nconfig/rbac/role.yaml grants\n  %v", documented, got)
	}
}

// documentedGrants reads the table that follows the "| resource | verbs |
// why |" header, as grantsOf keys and sorts the role's rules.
func documentedGrants(t *testing.T, path string) map[string][]string {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	quoted := regexp.MustCompile("`([^`]+)`")
	var rows []rbacv1.PolicyRule
	inTable := false
	scanner := bufio.NewScanner(bytes.NewReader(doc))
	for scanner.Scan() {
		line := scanner.Text()
		switch {
		case line == "| resource | verbs | why |":
			inTable = true
			continue
		case !inTable:
			continue
		case !strings.HasPrefix(line, "|"):
			inTable = false
			continue
		case strings.HasPrefix(line, "|---"):
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			t.Fatalf("%s: row %q has no resource and verbs cells", path, line)
		}
		var verbs []string
		for _, m := range quoted.FindAllStringSubmatch(cells[2], -1) {
			verbs = append(verbs, m[1])
		}
		for _, entry := range strings.Split(cells[1], ",") {
			var names []string
			for _, m := range quoted.FindAllStringSubmatch(entry, -1) {
				names = append(names, m[1])
			}
			switch len(names) {
			case 1:
				rows = append(rows, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: names, Verbs: verbs})
			case 2:
				rows = append(rows, rbacv1.PolicyRule{APIGroups: names[:1], Resources: names[1:], Verbs: verbs})
			default:
				t.Fatalf("%s: resource %q: want `group` `resource` or `resource`", path, strings.TrimSpace(entry))
			}
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no RBAC table found", path)
	}
	return grantsOf(rows)
}

// TestSecurityDocThreatModelNamesRealTests: every test the threat model
// of docs/security.md names (its last column) is a test function of this
// repository, so that no row claims a proof that does not exist. A name
// with a slash is a subtest: its top-level test must exist.
func TestSecurityDocThreatModelNamesRealTests(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	inTable := false
	scanner := bufio.NewScanner(bytes.NewReader(doc))
	for scanner.Scan() {
		line := scanner.Text()
		switch {
		case strings.HasPrefix(line, "| who | what they could reach |"):
			inTable = true
			continue
		case !inTable:
			continue
		case !strings.HasPrefix(line, "|"):
			inTable = false
			continue
		case strings.HasPrefix(line, "|---"):
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		tests := regexp.MustCompile("`(Test[A-Za-z0-9_]+)(/[^`]*)?`").FindAllStringSubmatch(cells[len(cells)-1], -1)
		if len(tests) == 0 {
			t.Errorf("threat model row names no test: %s", line)
		}
		for _, m := range tests {
			named[m[1]] = true
		}
	}
	if len(named) == 0 {
		t.Fatal("docs/security.md has no threat model table")
	}
	defined := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	err = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "hack"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, "_test.go"):
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(src, -1) {
			defined[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range named {
		if !defined[name] {
			t.Errorf("docs/security.md's threat model names %s, which no test file defines", name)
		}
	}
}
