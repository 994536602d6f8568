package cli

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/dynamic"
)

// GetOptions are the choices of `kubectl stepwise get rollout`.
type GetOptions struct {
	// Output is "" for the human view, or yaml or json for the object.
	Output string
	// Watch redraws on every change until ctx ends.
	Watch bool
	// Terminal: stdout is a terminal, so --watch redraws in place and
	// refreshes countdowns every second. Elsewhere each change is appended.
	Terminal bool
	Color    bool
	// Measurements is how many recent measurements the view lists.
	Measurements int
	Now          func() time.Time
}

// Get prints a Rollout once, or on every change with Watch (until ctx
// ends, whose error it then returns).
func Get(ctx context.Context, dyn dynamic.Interface, namespace, name string, out io.Writer, o GetOptions) error {
	if o.Output != "" {
		return getObject(ctx, dyn, namespace, name, out, o)
	}
	d := &display{out: out, o: o}
	if !o.Watch {
		s, err := Load(ctx, dyn, namespace, name)
		if err != nil {
			return err
		}
		return d.show(s)
	}
	if o.Terminal {
		// Countdowns and ages move without any change in the cluster: the
		// last snapshot is drawn again each second, locally. The API is
		// only watched, never polled.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					_ = d.redraw()
				}
			}
		}()
	}
	return Follow(ctx, dyn, namespace, name, func(s Snapshot) (bool, error) {
		return false, d.show(s)
	})
}

// display draws the human view; it is shared between Follow's callback and
// the terminal's refresh ticker.
type display struct {
	out io.Writer
	o   GetOptions

	mu    sync.Mutex
	last  *Snapshot
	drawn int
}

func (d *display) show(s Snapshot) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.last = &s
	return d.drawLocked()
}

func (d *display) redraw() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last == nil {
		return nil
	}
	return d.drawLocked()
}

func (d *display) drawLocked() error {
	s := d.last
	var text string
	if s.Rollout == nil {
		text = "The rollout was deleted; waiting for it to come back.\n"
	} else {
		text = RenderRollout(s.View(), ViewOptions{Now: d.o.Now(), Color: d.o.Color, Measurements: d.o.Measurements})
	}
	switch {
	case d.o.Watch && d.o.Terminal:
		// Home, draw, clear what the previous, longer view left below:
		// one write, so the screen does not flicker.
		text = "\x1b[H" + text + "\x1b[J"
		if d.drawn == 0 {
			text = "\x1b[2J" + text
		}
	case d.drawn > 0:
		text = "\n" + text
	}
	d.drawn++
	if _, err := io.WriteString(d.out, text); err != nil {
		return fmt.Errorf("writing the view: %w", err)
	}
	return nil
}

// getObject prints the Rollout as served, as kubectl get -o does. With
// Watch, each new version follows (YAML documents separated by "---").
func getObject(ctx context.Context, dyn dynamic.Interface, namespace, name string, out io.Writer, o GetOptions) error {
	p, err := NewPrinter(o.Output)
	if err != nil {
		return err
	}
	if !o.Watch {
		u, _, err := GetRollout(ctx, dyn, namespace, name)
		if err != nil {
			return err
		}
		return PrintObject(p, out, u)
	}
	lastVersion := ""
	return Follow(ctx, dyn, namespace, name, func(s Snapshot) (bool, error) {
		// Changes of the workload alone leave the Rollout as it was.
		if s.Object == nil || s.Object.GetResourceVersion() == lastVersion {
			return false, nil
		}
		lastVersion = s.Object.GetResourceVersion()
		return false, PrintObject(p, out, s.Object)
	})
}

// NewPrinter is the printer of -o yaml or -o json. One printer per command:
// the YAML printer separates the documents it prints with "---".
func NewPrinter(format string) (printers.ResourcePrinter, error) {
	switch format {
	case "yaml":
		return &printers.YAMLPrinter{}, nil
	case "json":
		return &printers.JSONPrinter{}, nil
	}
	return nil, fmt.Errorf("output format %q is not supported: use yaml or json", format)
}

// PrintObject prints an object without managedFields, as kubectl does by
// default: they are long and say nothing about the rollout.
func PrintObject(p printers.ResourcePrinter, out io.Writer, u *unstructured.Unstructured) error {
	u = u.DeepCopy()
	u.SetManagedFields(nil)
	if err := p.PrintObj(u, out); err != nil {
		return fmt.Errorf("printing %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}
