package config_test

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// managerFlags are the flags cmd/manager defines itself. A flag the binary
// does not know makes it exit at start, which only a running cluster would
// show otherwise.
func managerFlags(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "cmd", "manager", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`flag\.\w+Var\(&[\w.]+,\s*"([a-z0-9-]+)"`).FindAllSubmatch(src, -1) {
		flags[string(m[1])] = true
	}
	if len(flags) == 0 {
		t.Fatal("found no flag definitions in cmd/manager/main.go")
	}
	return flags
}

func TestManagerDeployment(t *testing.T) {
	objs := render(t)
	d := find[*appsv1.Deployment](t, objs, "Deployment", managerName)
	pod := d.Spec.Template.Spec

	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("replicas = %v, want 1", d.Spec.Replicas)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != image {
		t.Errorf("image = %q, want %q", c.Image, image)
	}

	args := map[string]string{}
	known := managerFlags(t)
	for _, a := range c.Args {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !known[name] {
			t.Errorf("argument %q is not a flag of cmd/manager", a)
		}
		args[name] = value
	}
	if v, ok := args["leader-elect"]; !ok || (v != "" && v != "true") {
		t.Errorf("args %v: want --leader-elect", c.Args)
	}
	if args["metrics-bind-address"] != ":8443" || args["health-probe-bind-address"] != ":8081" {
		t.Errorf("args %v: want --metrics-bind-address=:8443 and --health-probe-bind-address=:8081", c.Args)
	}
	// Metrics are served with authentication unless someone opts out.
	if v, ok := args["metrics-secure"]; ok && v != "true" {
		t.Errorf("args %v: the metrics endpoint must stay secure", c.Args)
	}

	// The Go soft memory limit is left to the manager (90% of the
	// container limit): GOMEMLIMIT equal to the limit lets the OOM killer
	// strike before the collector.
	var memEnv *corev1.EnvVar
	for i, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			t.Errorf("the Deployment sets GOMEMLIMIT (%+v): set %s, the manager takes 90%% of it", e, "STEPWISE_MEMORY_LIMIT")
		}
		if e.Name == "STEPWISE_MEMORY_LIMIT" {
			memEnv = &c.Env[i]
		}
	}
	switch {
	case memEnv == nil || memEnv.ValueFrom == nil || memEnv.ValueFrom.ResourceFieldRef == nil:
		t.Error("STEPWISE_MEMORY_LIMIT is not set from the container's resources")
	default:
		ref := memEnv.ValueFrom.ResourceFieldRef
		if ref.Resource != "limits.memory" || ref.ContainerName != c.Name || (!ref.Divisor.IsZero() && ref.Divisor.Value() != 1) {
			t.Errorf("STEPWISE_MEMORY_LIMIT = %+v, want limits.memory of container %s in bytes", ref, c.Name)
		}
	}

	port := func(p intstr.IntOrString) int32 {
		if p.Type == intstr.Int {
			return p.IntVal
		}
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				return cp.ContainerPort
			}
		}
		t.Errorf("port %q is not a container port", p.StrVal)
		return 0
	}
	for name, probe := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil {
			t.Errorf("no HTTP probe for %s", name)
			continue
		}
		if probe.HTTPGet.Path != name || port(probe.HTTPGet.Port) != 8081 {
			t.Errorf("probe for %s asks %s on port %v, want %s on 8081", name, probe.HTTPGet.Path, probe.HTTPGet.Port.String(), name)
		}
	}

	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[res]; !ok {
			t.Errorf("no %s request", res)
		}
		if _, ok := c.Resources.Limits[res]; !ok {
			t.Errorf("no %s limit", res)
		}
	}

	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("the Pod does not set runAsNonRoot: true")
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("the Pod does not use the RuntimeDefault seccomp profile")
	}
	csc := c.SecurityContext
	switch csc {
	case nil:
		t.Error("the container has no securityContext")
	default:
		if csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
			t.Error("the root filesystem is writable")
		}
		if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
			t.Error("privilege escalation is allowed")
		}
		if csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(csc.Capabilities.Add) > 0 {
			t.Errorf("capabilities = %+v, want drop [ALL] and nothing added", csc.Capabilities)
		}
		if csc.Privileged != nil && *csc.Privileged {
			t.Error("the container is privileged")
		}
	}

	sel := d.Spec.Selector.MatchLabels
	for k, v := range sel {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the Pod template labels %v", k, v, d.Spec.Template.Labels)
		}
	}

	// The metrics Service must reach the port the manager serves metrics on.
	svc := find[*corev1.Service](t, objs, "Service", metricsService)
	if len(svc.Spec.Selector) == 0 {
		t.Fatal("the metrics Service selects nothing")
	}
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("Service selector %s=%s does not match the manager Pods %v", k, v, d.Spec.Template.Labels)
		}
	}
	_, metricsPort, _ := net.SplitHostPort(args["metrics-bind-address"])
	want, _ := strconv.Atoi(metricsPort)
	if len(svc.Spec.Ports) != 1 || port(svc.Spec.Ports[0].TargetPort) != int32(want) {
		t.Errorf("metrics Service ports %+v do not lead to container port %d", svc.Spec.Ports, want)
	}
}
