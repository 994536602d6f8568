package commands

import (
	"strings"
	"testing"
)

// TestPlanTraffic: plan with traffic routing writes spec.trafficRouting
// and says beside each step what the routes carry once it is reached, as
// the controller's decision (traffic.Decide) gives it for the CloneSet's
// replicas: a step without traffic sends the canary its share of ready
// Pods (1 Pod of 4 is 25%, not the 10% of the flag), matches come with
// their step, and the last step sends everything.
func TestPlanTraffic(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		stdin   string   // the CloneSet; planCloneSet (4 replicas) when empty
		wantOut []string // lines of stdout, in order
		wantErr string   // stderr starts with it, on failure
	}{
		{
			name: "share_of_ready_pods",
			args: []string{"--steps", "10%,50%,100%", "--stable-service", "web", "--http-route", "web"},
			wantOut: []string{
				"# Each step says where requests go once it is reached, with 4 replicas;",
				"    - partition: 90% # 10% of pods updated; 25% of requests to web-canary (the canary's share of ready Pods)",
				"    - partition: 50% # 50% of pods updated; 50% of requests to web-canary (the canary's share of ready Pods)",
				"    - partition: 0 # every pod updated; 100% of requests to web-canary (the canary's share of ready Pods; no ready stable Pod)",
				"  trafficRouting:",
				"    stableService: web",
				"      name: web-canary",
				"      create: true",
				"      - name: web",
			},
		},
		{
			name: "weights_and_matches",
			args: []string{"--steps", "25%,75%,100%", "--pause", "manual", "--stable-service", "web", "--canary-service", "web-next",
				"--http-route", "edge/public#app", "--traffic", "0%,20%,100%", "--match", "header:x-canary=always", "--match", "query:canary~=^(1|yes)$"},
			wantOut: []string{
				"    - partition: 75% # 25% of pods updated; 0% of requests to web-next (the step's traffic), and those matching any of its 2 matches",
				"      traffic: 0",
				"            name: x-canary",
				"            name: canary",
				"            type: RegularExpression",
				"    - partition: 25% # 75% of pods updated; 20% of requests to web-next (the step's traffic), and those matching any of its 2 matches",
				"      traffic: 20",
				"    - partition: 0 # every pod updated; 100% of requests to web-next (the step's traffic; no ready stable Pod)",
				"      traffic: 100",
				"      name: web-next",
				"      - name: public",
				"        namespace: edge",
				"        ruleName: app",
			},
		},
		{
			// One replica: 10% updated keeps the only Pod on the stable
			// revision, so the step's weight and matches wait.
			name:  "one_replica",
			args:  []string{"--steps", "10%,100%", "--stable-service", "web", "--http-route", "web", "--traffic", "30%,100%", "--match", "header:x-canary=always"},
			stdin: strings.Replace(planCloneSet, "replicas: 4", "replicas: 1", 1),
			wantOut: []string{
				"# Each step says where requests go once it is reached, with 1 replica;",
				"    - partition: 90% # 10% of pods updated; 0% of requests to web-canary (the step's traffic; no ready canary Pod)",
				"    - partition: 0 # every pod updated; 100% of requests to web-canary (the step's traffic; no ready stable Pod)",
			},
		},
		{
			name:    "traffic_without_a_service",
			args:    []string{"--steps", "50%,100%", "--traffic", "10%,100%"},
			wantErr: "error: --stable-service is required with --canary-service, --http-route, --traffic and --match",
		},
		{
			name:    "service_without_a_route",
			args:    []string{"--steps", "50%,100%", "--stable-service", "web"},
			wantErr: "error: --http-route is required with --stable-service",
		},
		{
			name:    "weights_for_other_steps",
			args:    []string{"--steps", "50%,100%", "--stable-service", "web", "--http-route", "web", "--traffic", "100%"},
			wantErr: "error: --traffic: 1 weights for 2 steps: give one per step",
		},
		{
			name:    "bad_match",
			args:    []string{"--steps", "50%,100%", "--stable-service", "web", "--http-route", "web", "--match", "cookie:canary=1"},
			wantErr: `error: --match: "cookie:canary=1": "cookie" is neither header nor query`,
		},
		{
			name:    "refused_by_the_crd",
			args:    []string{"--steps", "50%,100%", "--stable-service", "web", "--http-route", "web", "--match", "header:x canary=1"},
			wantErr: "error: the planned rollout would be refused: Rollout.stepwise.dev \"web\" is invalid: spec.steps[0].matches[0].header.name",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"plan", "-f", "-"}, c.args...)
			stdin := c.stdin
			if stdin == "" {
				stdin = planCloneSet
			}
			code, stdout, stderr := runStdin(stdin, args...)
			if c.wantErr != "" {
				if code != ExitError || !strings.HasPrefix(stderr, c.wantErr) {
					t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and stderr starting with:\n%s", code, stderr, c.wantErr)
				}
				return
			}
			if code != ExitOK {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			rest := stdout
			for _, w := range c.wantOut {
				i := strings.Index(rest, w+"\n")
				if i < 0 {
					t.Fatalf("stdout lacks the line %q (after the previous ones):\n%s", w, stdout)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}
