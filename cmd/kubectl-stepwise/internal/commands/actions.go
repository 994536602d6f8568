package commands

import (
	"fmt"

	"github.com/spf13/cobra"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/cli"
)

// newActionCommand builds promote, abort, retry, pause or resume: each
// writes its annotation with a fresh timestamp.
func newActionCommand(e *env, a cli.Action) *cobra.Command {
	var (
		output string
		full   bool
	)
	cmd := &cobra.Command{
		Use:   a.Name + " NAME",
		Short: fmt.Sprintf("Ask the controller to %s a rollout", a.Name),
		Long: fmt.Sprintf("Ask the controller to %s a rollout: it %s.\n\n"+
			"Writes the annotation %s with the current time (RFC 3339) as a merge patch.\n"+
			"The controller acts once per new value and records the value handled in\n"+
			"the Rollout's status, so there is nothing to clean up afterwards.",
			a.Name, a.Effect, a.Annotation),
		Example:           fmt.Sprintf("  kubectl stepwise %s web -n shop", a.Name),
		Args:              oneName("rollout"),
		ValidArgsFunction: e.completeRollouts,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, true); err != nil {
				return err
			}
			a := a
			if full {
				a = cli.PromoteFull()
			}
			ns, dyn, err := e.namespacedClient()
			if err != nil {
				return err
			}
			token := cli.RequestToken(e.now())
			u, err := cli.Request(cmd.Context(), dyn, ns, args[0], a, token)
			if err != nil {
				return err
			}
			if output != "" {
				p, err := cli.NewPrinter(output)
				if err != nil {
					return err
				}
				return cli.PrintObject(p, e.streams.Out, u)
			}
			_, err = fmt.Fprintf(e.streams.Out, "rollout %s/%s: %s requested (%s=%s): the controller %s.\n",
				ns, args[0], a.Name, a.Annotation, token, a.Effect)
			return err
		},
	}
	addOutputFlag(cmd, &output, "")
	if a.Annotation == stepwisev1.PromoteAtAnnotation {
		p := cli.PromoteFull()
		cmd.Flags().BoolVar(&full, "full", false, fmt.Sprintf("Promote in full: writes %s instead; the controller %s.", p.Annotation, p.Effect))
		cmd.Example += "\n  kubectl stepwise promote web --full"
	}
	return cmd
}
