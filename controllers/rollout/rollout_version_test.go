package rollout

import (
	"strings"
	"testing"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestCheckVersion(t *testing.T) {
	policy := func(constraint string) *v1alpha1.VersionPolicy {
		return &v1alpha1.VersionPolicy{Container: "app", Constraint: constraint}
	}
	trusting := func(trusted string) *v1alpha1.VersionPolicy {
		return &v1alpha1.VersionPolicy{Container: "app", TrustedDowngrades: trusted}
	}
	app := func(tag string) map[string]string {
		return map[string]string{"app": "registry.example.com/web:" + tag, "sidecar": "proxy:9.9.9"}
	}
	tests := []struct {
		name          string
		policy        *v1alpha1.VersionPolicy
		update        map[string]string
		stable        map[string]string
		wasStable     bool
		wantViolation string // substring; "" for none
		wantDowngrade bool
		wantUntrusted string // substring; "" for none
		wantInvalid   string // substring; "" for none
	}{
		{name: "no policy checks nothing", policy: nil, update: app("garbage")},
		{name: "inside the constraint", policy: policy(">=1.0.0 <2.0.0"), update: app("1.5.0"), stable: app("1.0.0")},
		{name: "outside the constraint", policy: policy(">=1.0.0 <2.0.0"), update: app("2.0.0"), stable: app("1.0.0"),
			wantViolation: `container "app" runs version 2.0.0, outside constraint ">=1.0.0 <2.0.0"`},
		{name: "a v prefix is a version", policy: policy(">=1.0.0"), update: app("v1.2.0"), stable: app("v1.1.0")},
		{name: "a tag that is not a version", policy: policy(""), update: app("latest"), wantViolation: `tag "latest" of image "registry.example.com/web:latest" is not a semantic version`},
		{name: "no tag", policy: policy(""), update: map[string]string{"app": "web"}, wantViolation: "has no tag"},
		{name: "the container is missing", policy: policy(""), update: map[string]string{"other": "x:1.0.0"}, wantViolation: `has no container "app"`},
		{name: "a constraint that does not parse", policy: policy(">>>1"), update: app("1.0.0"), wantViolation: `constraint ">>>1" does not parse`},
		{name: "a downgrade to a revision that was stable before", policy: policy(""), update: app("1.2.0"), stable: app("1.5.0"), wasStable: true, wantDowngrade: true},
		{name: "a downgrade inside the constraint that was stable before", policy: policy(">=1.0.0"), update: app("1.2.0"), stable: app("1.5.0"), wasStable: true, wantDowngrade: true},
		{name: "a downgrade to a revision never stable takes the steps", policy: policy(""), update: app("1.2.0"), stable: app("1.5.0"),
			wantUntrusted: "version 1.2.0 is lower than stable 1.5.0, but revision web-2 was never stable here, so it takes the steps"},
		{name: "a hotfix pre-release below its release takes the steps", policy: policy(""), update: app("1.4.0-hotfix.1"), stable: app("1.4.0"),
			wantUntrusted: "version 1.4.0-hotfix.1 is lower than stable 1.4.0"},
		{name: "a hotfix pre-release that was stable before is trusted", policy: policy(""), update: app("1.4.0-hotfix.1"), stable: app("1.4.0"), wasStable: true, wantDowngrade: true},
		{name: "trustedDowngrades trusts a release it names", policy: trusting(">=1.0.0"), update: app("1.2.0"), stable: app("1.5.0"), wantDowngrade: true},
		{name: "trustedDowngrades does not trust a pre-release unless it names one", policy: trusting(">=1.0.0"), update: app("1.4.0-hotfix.1"), stable: app("1.4.0"),
			wantUntrusted: `1.4.0-hotfix.1 does not meet spec.versionPolicy.trustedDowngrades ">=1.0.0"`},
		{name: "trustedDowngrades naming a pre-release trusts it", policy: trusting(">=1.4.0-0"), update: app("1.4.0-hotfix.1"), stable: app("1.4.0"), wantDowngrade: true},
		{name: "trustedDowngrades outside its range", policy: trusting("~1.5.0"), update: app("1.2.0"), stable: app("1.5.3"),
			wantUntrusted: `does not meet spec.versionPolicy.trustedDowngrades "~1.5.0"`},
		{name: "trustedDowngrades that does not parse", policy: trusting(">>>1"), update: app("1.2.0"), stable: app("1.5.0"),
			wantInvalid: `spec.versionPolicy.trustedDowngrades ">>>1" does not parse`},
		{name: "an upgrade", policy: policy(""), update: app("1.6.0"), stable: app("1.5.0")},
		{name: "an upgrade is not a downgrade even if it was stable before", policy: policy(""), update: app("1.6.0"), stable: app("1.5.0"), wasStable: true},
		{name: "unknown stable images detect no downgrade", policy: policy(""), update: app("1.2.0"), stable: nil, wasStable: true},
		{name: "a stable tag that is not a version detects no downgrade", policy: policy(""), update: app("1.2.0"), stable: app("latest"), wasStable: true},
		{name: "a violation wins over a downgrade", policy: policy(">=1.3.0"), update: app("1.2.0"), stable: app("1.5.0"), wasStable: true, wantViolation: "outside constraint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkVersion(tt.policy, "web-2", tt.update, tt.stable, tt.wasStable)
			for _, f := range []struct{ field, got, want string }{
				{"violation", got.Violation, tt.wantViolation},
				{"untrusted", got.Untrusted, tt.wantUntrusted},
				{"invalid", got.Invalid, tt.wantInvalid},
			} {
				if f.want == "" && f.got != "" || !strings.Contains(f.got, f.want) {
					t.Errorf("%s = %q, want %q", f.field, f.got, f.want)
				}
			}
			if got.Downgrade != tt.wantDowngrade {
				t.Errorf("downgrade = %v, want %v", got.Downgrade, tt.wantDowngrade)
			}
		})
	}
}
