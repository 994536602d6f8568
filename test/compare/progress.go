package compare

import "time"

// PodState is what the benchmark sees of one Pod at one moment.
type PodState struct {
	Ready    bool // Ready condition True and not terminating
	NewImage bool // every container's status reports the new image

	// What the timeline follows (timeline.go).
	Deleting     bool // deletionTimestamp set
	Bound        bool // spec.nodeName set
	SpecNewImage bool // every container's spec names the new image
	GateFalse    bool // InPlaceUpdateReady False
	GateTrue     bool // InPlaceUpdateReady True
}

// Point is the rollout's progress at one moment after the change.
type Point struct {
	At          time.Duration
	ReadyNew    int // Pods ready on the new image
	Unavailable int // desired Pods minus ready Pods (old or new)
}

// Progress follows a rollout of Desired Pods from the Pods' states, as a
// watch reports them, and keeps the series of points for the chart.
type Progress struct {
	Desired int
	Start   time.Time

	pods       map[string]PodState
	ready      int
	readyNew   int
	Points     []Point
	FirstReady time.Duration // first Pod ready on the new image; -1 until then
	MaxUnavail int
	Done       time.Duration // all Desired Pods ready on the new image and no others; -1 until then
}

// NewProgress starts following a rollout that began at start.
func NewProgress(desired int, start time.Time) *Progress {
	return &Progress{Desired: desired, Start: start, pods: map[string]PodState{}, FirstReady: -1, Done: -1}
}

// Seed records a Pod's state before the change, without a point.
func (p *Progress) Seed(uid string, s PodState) {
	p.forget(uid)
	p.pods[uid] = s
	if s.Ready {
		p.ready++
		if s.NewImage {
			p.readyNew++
		}
	}
}

// Set records a Pod's state at a moment; Delete its disappearance.
func (p *Progress) Set(uid string, s PodState, at time.Time) {
	p.Seed(uid, s)
	p.record(at)
}

// Delete records that a Pod is gone.
func (p *Progress) Delete(uid string, at time.Time) {
	p.forget(uid)
	delete(p.pods, uid)
	p.record(at)
}

func (p *Progress) forget(uid string) {
	if old, ok := p.pods[uid]; ok && old.Ready {
		p.ready--
		if old.NewImage {
			p.readyNew--
		}
	}
}

func (p *Progress) record(at time.Time) {
	since := at.Sub(p.Start)
	if since < 0 {
		since = 0
	}
	unavail := max(p.Desired-p.ready, 0)
	if unavail > p.MaxUnavail {
		p.MaxUnavail = unavail
	}
	if p.readyNew > 0 && p.FirstReady < 0 {
		p.FirstReady = since
	}
	if p.readyNew == p.Desired && len(p.pods) == p.Desired && p.Done < 0 {
		p.Done = since
	}
	if n := len(p.Points); n > 0 && p.Points[n-1].ReadyNew == p.readyNew && p.Points[n-1].Unavailable == unavail {
		return
	}
	p.Points = append(p.Points, Point{At: since, ReadyNew: p.readyNew, Unavailable: unavail})
}

// IsDone reports whether every desired Pod is ready on the new image.
func (p *Progress) IsDone() bool { return p.Done >= 0 }
