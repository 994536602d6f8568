package argocdhealth_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stepwise-dev/stepwise/test/argocdhealth"
)

func TestEvaluateReadsTheReturnedTable(t *testing.T) {
	const script = `
local hs = {}
if obj.status.ready == obj.spec.replicas and obj.metadata.labels.tier == "web" and obj.spec.ports[2] == 443 then
  hs.status = "Healthy"
  hs.message = obj.status.ready .. " ready"
else
  hs.status = "Progressing"
end
return hs`
	// Integers arrive as int64 from an unstructured object and as float64
	// from encoding/json; both must compare equal in Lua.
	obj := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"tier": "web"}},
		"spec":     map[string]any{"replicas": int64(3), "ports": []any{int64(80), json.Number("443")}},
		"status":   map[string]any{"ready": float64(3)},
	}
	status, message, err := argocdhealth.Evaluate(script, obj)
	if err != nil {
		t.Fatal(err)
	}
	if status != argocdhealth.Healthy || message != "3 ready" {
		t.Fatalf("got %q %q, want Healthy \"3 ready\"", status, message)
	}
}

func TestEvaluateMissingFieldsAreNil(t *testing.T) {
	const script = `
if obj.status == nil then
  return {status = "Progressing", message = "no status"}
end
return {status = "Healthy"}`
	status, message, err := argocdhealth.Evaluate(script, map[string]any{"spec": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if status != argocdhealth.Progressing || message != "no status" {
		t.Fatalf("got %q %q", status, message)
	}
}

// The sandbox must be as poor as Argo CD's, or a script that passes here
// could fail in Argo CD.
func TestEvaluateHasNoStringOrMathLibrary(t *testing.T) {
	for _, script := range []string{
		`return {status = string.upper("healthy")}`,
		`return {status = "Healthy", message = tostring(math.floor(1.5))}`,
		`local s = "Healthy"; return {status = s:lower()}`,
		`io.write("x"); return {status = "Healthy"}`,
	} {
		if _, _, err := argocdhealth.Evaluate(script, map[string]any{}); err == nil {
			t.Errorf("script %q ran, want an error: Argo CD does not open that library", script)
		}
	}
	// What stays: base and table.
	status, _, err := argocdhealth.Evaluate(`local t = {}; table.insert(t, "Healthy"); return {status = tostring(t[1])}`, map[string]any{})
	if err != nil || status != argocdhealth.Healthy {
		t.Fatalf("base and table libraries: got %q, %v", status, err)
	}
}

func TestEvaluateRejectsBadResults(t *testing.T) {
	for name, tc := range map[string]struct {
		script  string
		invalid bool
	}{
		"unknown status":    {`return {status = "Fine"}`, true},
		"no status":         {`return {message = "x"}`, true},
		"status not string": {`return {status = 1}`, true},
		"not a table":       {`return "Healthy"`, false},
		"nothing returned":  {`local x = 1`, false},
		"message not text":  {`return {status = "Healthy", message = {}}`, false},
		"syntax error":      {`return {status = }`, false},
		"runtime error":     {`return {status = obj.status.phase}`, false},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := argocdhealth.Evaluate(tc.script, map[string]any{})
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, argocdhealth.ErrInvalidStatus); got != tc.invalid {
				t.Fatalf("errors.Is(err, ErrInvalidStatus) = %v, want %v (err: %v)", got, tc.invalid, err)
			}
		})
	}
}

func TestEvaluateStopsEndlessScripts(t *testing.T) {
	_, _, err := argocdhealth.Evaluate(`while true do end`, map[string]any{})
	if err == nil {
		t.Fatal("an endless loop returned no error")
	}
}

func TestEvaluateRejectsTypedValues(t *testing.T) {
	type spec struct{ Replicas int }
	_, _, err := argocdhealth.Evaluate(`return {status = "Healthy"}`, map[string]any{"spec": spec{Replicas: 1}})
	if err == nil || !strings.Contains(err.Error(), "obj.spec") {
		t.Fatalf("got %v, want an error naming obj.spec", err)
	}
}
