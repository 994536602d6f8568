package commands

import (
	"github.com/spf13/cobra"

	"github.com/stepwise-dev/stepwise/internal/cli"
)

func newListCommand(e *env) *cobra.Command {
	var allNamespaces bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List rollouts: phase, step, traffic weight, age",
		Long: "List the rollouts of the namespace, or of every namespace with -A: each one's\n" +
			"phase (\"(stale)\" while the status describes an older generation), its step in\n" +
			"progress (\"2/3\"), the canary's share of requests where traffic routing sets\n" +
			"one (\"20%\", \"+1\" for a match rule), its age and the reason of its phase.",
		Example: "  kubectl stepwise list -n shop\n  kubectl stepwise list -A",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			namespace := ""
			if !allNamespaces {
				var err error
				if namespace, err = e.namespace(); err != nil {
					return err
				}
			}
			dyn, err := e.dynamic()
			if err != nil {
				return err
			}
			rollouts, err := cli.ListRollouts(cmd.Context(), dyn, namespace)
			if err != nil {
				return err
			}
			return cli.WriteList(e.streams.Out, rollouts, namespace, cli.ListOptions{
				AllNamespaces: allNamespaces, Now: e.now(), Color: cli.ColorEnabled(e.streams.Out, e.getenv),
			})
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "List the rollouts of every namespace.")
	return cmd
}
