package commands

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stepwise-dev/stepwise/internal/cli"
)

func newUndoCommand(e *env) *cobra.Command {
	var ignoreGitOps bool
	cmd := &cobra.Command{
		Use:   "undo NAME",
		Short: "Set a rollout's CloneSet back to its previous stable revision, in place",
		Long: "Set the template of a rollout's CloneSet back to an earlier revision, read from\n" +
			"the ControllerRevision the CloneSet keeps for it; Pods change in place.\n\n" +
			"During a rollout (or after an abort) that is the stable revision: the Rollout\n" +
			"then takes its rollback fast path, every Pod back at once, without steps or\n" +
			"analysis. When the CloneSet already runs its stable revision, it is the\n" +
			"stable revision before that one, which the Rollout rolls out like any new\n" +
			"revision (steps and analysis), unless spec.versionPolicy sees a downgrade to\n" +
			"a revision that was stable.\n\n" +
			"A Rollout or CloneSet that Flux or Argo CD applies is refused: revert the\n" +
			"commit in git instead, which takes the same fast path; git would otherwise\n" +
			"put the template back at its next sync. --ignore-gitops sets it back anyway.",
		Example:           "  kubectl stepwise undo web -n shop",
		Args:              oneName("rollout"),
		ValidArgsFunction: e.completeRollouts,
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, dyn, err := e.namespacedClient()
			if err != nil {
				return err
			}
			res, err := cli.Undo(cmd.Context(), dyn, ns, args[0], ignoreGitOps)
			if err != nil {
				return err
			}
			if res.Stable {
				_, err = fmt.Fprintf(e.streams.Out, "cloneset %s/%s: template set back to revision %s, the stable revision of rollout %s: "+
					"the Rollout moves every Pod back to it at once, without steps or analysis.\n", ns, res.CloneSet, res.Revision, args[0])
				return err
			}
			_, err = fmt.Fprintf(e.streams.Out, "cloneset %s/%s: template set back to revision %s, stable before %s: "+
				"rollout %s rolls it out as a new revision (steps and analysis), unless spec.versionPolicy trusts the downgrade.\n",
				ns, res.CloneSet, res.Revision, res.Replaced, args[0])
			return err
		},
	}
	cmd.Flags().BoolVar(&ignoreGitOps, "ignore-gitops", false, "Set back a CloneSet that a GitOps tool applies; git puts its template back at its next sync.")
	return cmd
}
