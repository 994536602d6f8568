package commands

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/stepwise-dev/stepwise/internal/cli"
)

func newGetCommand(e *env) *cobra.Command {
	var (
		output       string
		watch        bool
		measurements int
	)
	cmd := &cobra.Command{
		Use:   "get rollout NAME",
		Short: "Show a rollout: phase, steps, gate, pause and measurements",
		Long: "Show a rollout: its phase and message, canary and stable revisions, the steps\n" +
			"with the current one marked and its progress (updated ready pods against\n" +
			"replicas minus the step's partition), the workload gate, the pause, the\n" +
			"analysis and the last measurements. With -o, print the Rollout object.",
		Example: "  kubectl stepwise get rollout web -n shop\n" +
			"  kubectl stepwise get rollout/web --watch\n" +
			"  kubectl stepwise get rollout web -o yaml",
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: e.completeGet,
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := rolloutName(args)
			if err != nil {
				return err
			}
			if err := checkOutput(output, true); err != nil {
				return err
			}
			if measurements < 1 {
				return usagef("--measurements: %d is not a positive count", measurements)
			}
			ns, dyn, err := e.namespacedClient()
			if err != nil {
				return err
			}
			return cli.Get(cmd.Context(), dyn, ns, name, e.streams.Out, cli.GetOptions{
				Output:       output,
				Watch:        watch,
				Terminal:     cli.IsTerminal(e.streams.Out),
				Color:        cli.ColorEnabled(e.streams.Out, e.getenv),
				Measurements: measurements,
				Now:          e.now,
			})
		},
	}
	addOutputFlag(cmd, &output, "")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "After showing the rollout, show it again on every change of it or its workload.")
	cmd.Flags().IntVar(&measurements, "measurements", cli.DefaultMeasurements, "How many of the most recent measurements to list.")
	return cmd
}

// rolloutName accepts kubectl's spellings: "rollout NAME", "rollouts NAME",
// "ro NAME", "rollout/NAME" and the group-qualified resource.
func rolloutName(args []string) (string, error) {
	if len(args) == 1 {
		if kind, name, ok := strings.Cut(args[0], "/"); ok {
			args = []string{kind, name}
		}
	}
	switch {
	case len(args) == 0:
		return "", usagef("a resource type and NAME are required: get rollout NAME")
	case !isRolloutType(args[0]):
		return "", usagef("resource type %q is not supported: only rollout is", args[0])
	case len(args) == 1 || args[1] == "":
		return "", usagef("rollout NAME is required: get rollout NAME")
	case len(args) > 2:
		return "", usagef("one rollout NAME is expected, got %s", strings.Join(args[1:], " "))
	}
	return args[1], nil
}

func isRolloutType(s string) bool {
	switch strings.ToLower(s) {
	case "rollout", "rollouts", "ro", "rollout.stepwise.dev", "rollouts.stepwise.dev":
		return true
	}
	return false
}
