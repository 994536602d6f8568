// Package rbac ships the manager's generated ClusterRole (role.yaml, which
// `make manifests` writes from the +kubebuilder:rbac markers), so that the
// manager can check at start that it holds these rules in every namespace
// it watches (internal/manager), and tests can ask the API server about
// them.
package rbac

import (
	_ "embed"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

//go:embed role.yaml
var roleYAML []byte

// ManagerRules are the rules of ClusterRole stepwise-manager, as generated.
func ManagerRules() ([]rbacv1.PolicyRule, error) {
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(roleYAML, &role); err != nil {
		return nil, fmt.Errorf("decoding the embedded config/rbac/role.yaml: %w", err)
	}
	return role.Rules, nil
}
