// Package argocdhealth runs Argo CD resource health scripts (Lua) outside
// Argo CD, in an environment shaped like the one Argo CD gives scripts from
// argocd-cm, so that the scripts in config/argocd can be tested against
// sample objects here and against live objects in end-to-end tests.
//
// What is mirrored: gopher-lua (the interpreter Argo CD embeds), only the
// package, base and table libraries (Argo CD leaves out string, math, io and
// debug for custom scripts unless useOpenLibs is set), the object in the
// global obj, a short time limit, and the result read as the table
// {status=..., message=...} left on the stack. Argo CD's trimmed os library
// is not offered: a script that needs it fails here, which errs on the
// strict side. Where Argo CD turns an invalid status into Unknown, Evaluate
// returns an error, so that a test notices.
package argocdhealth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// Health statuses a script may return, as Argo CD knows them.
const (
	Healthy     = "Healthy"
	Progressing = "Progressing"
	Degraded    = "Degraded"
	Suspended   = "Suspended"
	Missing     = "Missing"
	Unknown     = "Unknown"
)

// Timeout bounds one evaluation. Argo CD gives a script one second; a
// health check that needs more is broken, not slow.
var Timeout = time.Second

// ErrInvalidStatus is returned when a script returns a status Argo CD does
// not know (Argo CD would show Unknown).
var ErrInvalidStatus = errors.New("health script returned an invalid status")

var validStatuses = map[string]bool{
	Healthy: true, Progressing: true, Degraded: true, Suspended: true, Missing: true, Unknown: true,
}

// Evaluate runs script with obj as the global obj and returns the status
// and message of the table it returns.
//
// obj is an object as Kubernetes clients hold it in memory: the Object of
// an unstructured.Unstructured, or a map decoded from JSON or YAML. Numbers
// may be any Go integer or float type or json.Number; they all become Lua
// numbers.
func Evaluate(script string, obj map[string]any) (status, message string, err error) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := L.CallByParam(lua.P{Fn: L.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return "", "", fmt.Errorf("opening Lua library %q: %w", lib.name, err)
		}
	}

	value, err := toLua(L, obj, "obj")
	if err != nil {
		return "", "", err
	}
	L.SetGlobal("obj", value)

	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	L.SetContext(ctx)
	if err := L.DoString(script); err != nil {
		return "", "", fmt.Errorf("running health script: %w", err)
	}

	result, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("health script returned %s, want a table {status=..., message=...}", L.Get(-1).Type())
	}
	st, ok := result.RawGetString("status").(lua.LString)
	if !ok {
		return "", "", fmt.Errorf("%w: status is %s, want a string", ErrInvalidStatus, result.RawGetString("status").Type())
	}
	if !validStatuses[string(st)] {
		return "", "", fmt.Errorf("%w: %q", ErrInvalidStatus, string(st))
	}
	switch m := result.RawGetString("message").(type) {
	case lua.LString:
		message = string(m)
	case *lua.LNilType:
	default:
		// Argo CD decodes the table into a struct whose message is a
		// string: anything else fails there.
		return "", "", fmt.Errorf("health script returned a message of type %s, want a string", m.Type())
	}
	return string(st), message, nil
}

// EvaluateFile is Evaluate with the script read from a file.
func EvaluateFile(path string, obj map[string]any) (status, message string, err error) {
	script, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	return Evaluate(string(script), obj)
}

// toLua converts a JSON-like Go value into a Lua value: maps become
// tables with string keys, slices become sequences starting at 1.
func toLua(L *lua.LState, v any, path string) (lua.LValue, error) {
	switch x := v.(type) {
	case nil:
		return lua.LNil, nil
	case bool:
		return lua.LBool(x), nil
	case string:
		return lua.LString(x), nil
	case int:
		return lua.LNumber(x), nil
	case int32:
		return lua.LNumber(x), nil
	case int64:
		return lua.LNumber(x), nil
	case float32:
		return lua.LNumber(x), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%s: %v is not a JSON number", path, x)
		}
		return lua.LNumber(x), nil
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return lua.LNumber(f), nil
	case []any:
		t := L.CreateTable(len(x), 0)
		for i, item := range x {
			lv, err := toLua(L, item, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			t.Append(lv)
		}
		return t, nil
	case map[string]any:
		t := L.CreateTable(0, len(x))
		// Sorted keys make a failing conversion report the same field
		// every run.
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			lv, err := toLua(L, x[k], path+"."+k)
			if err != nil {
				return nil, err
			}
			t.RawSetString(k, lv)
		}
		return t, nil
	default:
		// A typed Kubernetes object or a nested struct: the caller should
		// convert it first (runtime.DefaultUnstructuredConverter), as Argo
		// CD only ever sees unstructured objects.
		return nil, fmt.Errorf("%s: cannot convert %T to Lua; convert typed objects to unstructured first", path, v)
	}
}
