package commands

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/stepwise-dev/stepwise/internal/cli"
)

// completeRollouts completes a rollout NAME with the names of the
// namespace's Rollouts (-n and --kubeconfig are parsed by then). A cluster
// that cannot be asked completes nothing, quietly: completion must never
// print errors into a shell.
func (e *env) completeRollouts(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return e.rolloutNames(cmd, toComplete), cobra.ShellCompDirectiveNoFileComp
}

func (e *env) rolloutNames(cmd *cobra.Command, prefix string) []string {
	ns, dyn, err := e.namespacedClient()
	if err != nil {
		return nil
	}
	rollouts, err := cli.ListRollouts(cmd.Context(), dyn, ns)
	if err != nil {
		return nil
	}
	var names []string
	for _, r := range rollouts {
		if strings.HasPrefix(r.Name, prefix) {
			names = append(names, r.Name)
		}
	}
	return names
}

// completeGet completes get's "rollout NAME" and "rollout/NAME".
func (e *env) completeGet(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	switch {
	case len(args) == 0 && strings.HasPrefix(toComplete, "rollout/"):
		var out []string
		for _, n := range e.rolloutNames(cmd, strings.TrimPrefix(toComplete, "rollout/")) {
			out = append(out, "rollout/"+n)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	case len(args) == 0:
		return []string{"rollout"}, cobra.ShellCompDirectiveNoFileComp
	case len(args) == 1 && isRolloutType(args[0]):
		return e.rolloutNames(cmd, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}
