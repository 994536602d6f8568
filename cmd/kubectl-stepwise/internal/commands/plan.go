package commands

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/cli"
)

func newPlanCommand(e *env) *cobra.Command {
	var (
		steps, pause, errorRateMax, prometheus string
		name, container, versionConstraint     string
		output, filename                       string
		tf                                     trafficFlags
		af                                     templateFlags
	)
	cmd := &cobra.Command{
		Use:   "plan (CLONESET | -f FILE [CLONESET]) --steps 10%,50%,100%",
		Short: "Print a Rollout manifest for a CloneSet, to commit to git",
		Long: "Print a Rollout manifest for a CloneSet, to commit to git. --steps is the\n" +
			"percent of pods updated at each step; the manifest stores partitions, the\n" +
			"pods kept on the stable revision (10% updated is partition 90%), and its last\n" +
			"step is partition 0. --pause applies after every step but the last.\n" +
			"--error-rate-max with --prometheus adds an analysis of the canary pods'\n" +
			"share of 5xx responses (http_requests_total); edit the query to fit your\n" +
			"metrics. The CloneSet is read for its name, namespace and containers:\n" +
			"from the cluster, or with -f from a file (- for stdin) with no cluster at\n" +
			"all. A file is checked against the CloneSet CRD shipped in this binary,\n" +
			"CEL rules included, and refused with the API server's message when it\n" +
			"would be refused at apply time; CLONESET picks one when the file has\n" +
			"several. The printed Rollout is checked the same way.\n\n" +
			"--stable-service with --http-route adds traffic routing through Gateway API\n" +
			"HTTPRoutes (docs/traffic.md): --traffic is the percent of requests sent to\n" +
			"the canary at each step (unset: its share of ready pods), --match sends\n" +
			"matching requests to it at every step but the last. Each step's comment\n" +
			"says what the routes will carry once it is reached, as the controller\n" +
			"decides it for the CloneSet's replicas.\n\n" +
			"--analysis-template measures an AnalysisTemplate (cluster:NAME for a\n" +
			"ClusterAnalysisTemplate) in each step's analysis, --background-template\n" +
			"from the first step until promotion, and --analysis-arg gives them args\n" +
			"(docs/analysis.md). The templates are not read: a missing one stalls the\n" +
			"Rollout, naming it, once a rollout starts.",
		Example: "  kubectl stepwise plan web -n shop --steps 10%,50%,100% --pause 1m \\\n" +
			"    --error-rate-max 0.01 --prometheus http://prometheus.monitoring:9090 > rollout.yaml\n" +
			"  kubectl stepwise plan -f deploy/web/cloneset.yaml --steps 25%,100% > deploy/web/rollout.yaml\n" +
			"  kustomize build deploy/web | kubectl stepwise plan -f - web --steps 25%,100%\n" +
			"  kubectl stepwise plan -f deploy/web/cloneset.yaml --steps 10%,50%,100% --pause manual \\\n" +
			"    --stable-service web --http-route web --traffic 0%,20%,100% --match header:x-canary=always\n" +
			"  kubectl stepwise plan web -n shop --steps 10%,50%,100% --pause 10m \\\n" +
			"    --analysis-template error-rate --background-template cluster:latency-p99 --analysis-arg service=checkout",
		Args: func(cmd *cobra.Command, args []string) error {
			if filename != "" && len(args) <= 1 {
				return nil
			}
			return oneName("CloneSet")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// Every flag is checked before the CloneSet is read, so that
			// mistakes show without a cluster.
			o, err := planOptions(steps, pause, errorRateMax, prometheus, versionConstraint)
			if err != nil {
				return err
			}
			if errs := validation.IsDNS1123Subdomain(name); name != "" && len(errs) > 0 {
				return usagef("--name: %q is not a valid object name: %s", name, strings.Join(errs, "; "))
			}
			o.Name, o.Container = name, container
			if o.Traffic, err = tf.options(len(o.Updated)); err != nil {
				return err
			}
			if o.Templates, err = af.options(); err != nil {
				return err
			}
			if err := checkOutput(output, false); err != nil {
				return err
			}
			cs, err := e.planCloneSet(cmd.Context(), filename, args)
			if err != nil {
				return err
			}
			r, err := cli.BuildPlan(cs, o)
			if err != nil {
				return &usageError{err: err}
			}
			if err := cli.ValidatePlan(cmd.Context(), r); err != nil {
				return err
			}
			st, err := planStepTraffic(r, ptr.Deref(cs.Spec.Replicas, 1))
			if err != nil {
				return err
			}
			return cli.WritePlan(e.streams.Out, r, output, st)
		},
	}
	f := cmd.Flags()
	f.StringVar(&steps, "steps", "", "Percent of pods updated at each step, rising to 100%, such as 10%,50%,100%. Required.")
	f.StringVar(&pause, "pause", "", `Pause after each step but the last: a duration such as 1m, or "manual" to wait for kubectl stepwise promote.`)
	f.StringVar(&errorRateMax, "error-rate-max", "", "Highest share of 5xx responses of the canary pods, from 0 to 1 (0.01 is 1%). Needs --prometheus.")
	f.StringVar(&prometheus, "prometheus", "", "Address of the Prometheus that --error-rate-max asks, such as http://prometheus.monitoring:9090.")
	f.StringVar(&name, "name", "", "Name of the Rollout; the CloneSet's by default.")
	f.StringVar(&container, "container", "", "Container whose image tag is a semantic version, for spec.versionPolicy; the only container by default when --version-constraint is set.")
	f.StringVar(&versionConstraint, "version-constraint", "", `Semver constraint the new image tag must meet, such as ">=1.0.0 <2.0.0" (adds spec.versionPolicy).`)
	f.StringVarP(&filename, "filename", "f", "", "Read the CloneSet from this YAML or JSON file (- for stdin) instead of the cluster; it is validated against the shipped CRD.")
	f.StringVar(&tf.stable, "stable-service", "", "Service the HTTPRoutes send to: adds spec.trafficRouting (needs --http-route).")
	f.StringVar(&tf.canary, "canary-service", "", "Canary Service; STABLE-canary, created by Stepwise from the stable one, by default.")
	f.StringArrayVar(&tf.routes, "http-route", nil, "HTTPRoute that sends to --stable-service, as [NAMESPACE/]NAME[#RULE] (RULE: index or name); repeatable.")
	f.StringVar(&tf.weights, "traffic", "", "Percent of requests sent to the canary at each step, such as 0%,20%,100%; unset: its share of ready pods.")
	f.StringArrayVar(&tf.matches, "match", nil, "Requests sent to the canary at every step but the last: header:NAME=VALUE or query:NAME=VALUE (~= for a regular expression); repeatable.")
	f.StringArrayVar(&af.steps, "analysis-template", nil, "AnalysisTemplate measured in each step's analysis, as NAME or cluster:NAME (a ClusterAnalysisTemplate); repeatable.")
	f.StringArrayVar(&af.background, "background-template", nil, "AnalysisTemplate measured from the first step until promotion (spec.analysis.background), as NAME or cluster:NAME; repeatable.")
	f.StringArrayVar(&af.args, "analysis-arg", nil, "Arg of the templates, as NAME=VALUE; repeatable.")
	addOutputFlag(cmd, &output, "yaml")
	return cmd
}

// templateFlags are plan's analysis template flags.
type templateFlags struct {
	steps, background, args []string
}

// options parses the template flags; nil when none is set.
func (f templateFlags) options() (*cli.PlanTemplates, error) {
	if len(f.steps) == 0 && len(f.background) == 0 && len(f.args) == 0 {
		return nil, nil
	}
	t := &cli.PlanTemplates{}
	for _, pass := range []struct {
		flag string
		in   []string
		out  *[]stepwisev1.AnalysisTemplateRef
	}{{"analysis-template", f.steps, &t.Steps}, {"background-template", f.background, &t.Background}} {
		for _, s := range pass.in {
			ref, err := cli.ParseTemplateRef(s)
			if err != nil {
				return nil, usagef("--%s: %w", pass.flag, err)
			}
			*pass.out = append(*pass.out, ref)
		}
	}
	for _, s := range f.args {
		a, err := cli.ParseArg(s)
		if err != nil {
			return nil, usagef("--analysis-arg: %w", err)
		}
		t.Args = append(t.Args, a)
	}
	return t, nil
}

// trafficFlags are plan's traffic routing flags.
type trafficFlags struct {
	stable, canary, weights string
	routes, matches         []string
}

// options parses the traffic flags; nil when none is set.
func (f trafficFlags) options(steps int) (*cli.PlanTraffic, error) {
	if f.stable == "" {
		if f.canary != "" || f.weights != "" || len(f.routes) > 0 || len(f.matches) > 0 {
			return nil, usagef("--stable-service is required with --canary-service, --http-route, --traffic and --match: the Service your HTTPRoute sends to")
		}
		return nil, nil
	}
	if len(f.routes) == 0 {
		return nil, usagef("--http-route is required with --stable-service: the HTTPRoute that sends to it")
	}
	t := &cli.PlanTraffic{StableService: f.stable, CanaryService: f.canary, CreateCanary: f.canary == ""}
	for _, s := range f.routes {
		ref, err := cli.ParseRoute(s)
		if err != nil {
			return nil, usagef("--http-route: %w", err)
		}
		t.Routes = append(t.Routes, ref)
	}
	if f.weights != "" {
		w, err := cli.ParseWeights(f.weights, steps)
		if err != nil {
			return nil, usagef("--traffic: %w", err)
		}
		t.Weights = w
	}
	for _, s := range f.matches {
		m, err := cli.ParseMatch(s)
		if err != nil {
			return nil, usagef("--match: %w", err)
		}
		t.Matches = append(t.Matches, m)
	}
	return t, nil
}

// planCloneSet reads the CloneSet from the cluster (the default) or, with
// -f, from a file or stdin without any cluster: in GitOps the CloneSet is a
// file that may not be applied yet. Only an explicit -n applies to a file;
// the kubeconfig's namespace is a cluster's, and a file without a namespace
// gets a Rollout without one, for the GitOps tool to place.
func (e *env) planCloneSet(ctx context.Context, filename string, args []string) (*stepwisev1.CloneSet, error) {
	if filename == "" {
		ns, dyn, err := e.namespacedClient()
		if err != nil {
			return nil, err
		}
		return cli.GetCloneSet(ctx, dyn, ns, args[0])
	}
	src := cli.ManifestFile{Source: filename, Data: e.streams.In}
	if filename != "-" {
		file, err := os.Open(filename)
		if err != nil {
			return nil, fmt.Errorf("-f: %w", err)
		}
		defer func() { _ = file.Close() }()
		src.Data = file
	}
	var name, ns string
	if len(args) == 1 {
		name = args[0]
	}
	if e.config.Namespace != nil {
		ns = *e.config.Namespace
	}
	return cli.ReadCloneSet(ctx, src, name, ns)
}

// planOptions parses the flags that need no cluster. Each error names its
// flag, as people fix one flag at a time.
func planOptions(steps, pause, errorRateMax, prometheus, versionConstraint string) (cli.PlanOptions, error) {
	var o cli.PlanOptions
	var err error
	if steps == "" {
		return o, usagef("--steps is required: the percent of pods updated at each step, such as 10%%,50%%,100%%")
	}
	if o.Updated, err = cli.ParseSteps(steps); err != nil {
		return o, usagef("--steps: %w", err)
	}
	if o.Pause, err = cli.ParsePause(pause); err != nil {
		return o, usagef("--pause: %w", err)
	}
	if errorRateMax != "" {
		if o.ErrorRateMax, err = cli.ParseErrorRateMax(errorRateMax); err != nil {
			return o, usagef("--error-rate-max: %w", err)
		}
	}
	if prometheus != "" {
		if o.Prometheus, err = cli.ParsePrometheusAddress(prometheus); err != nil {
			return o, usagef("--prometheus: %w", err)
		}
	}
	switch {
	case o.ErrorRateMax != "" && o.Prometheus == "":
		return o, usagef("--prometheus is required with --error-rate-max: the address of the Prometheus to ask")
	case o.ErrorRateMax == "" && o.Prometheus != "":
		return o, usagef("--error-rate-max is required with --prometheus: the highest error rate a step may show, such as 0.01")
	}
	if o.VersionConstraint, err = cli.ParseVersionConstraint(versionConstraint); err != nil {
		return o, usagef("--version-constraint: %w", err)
	}
	return o, nil
}
