package rollout

import (
	"testing"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestAppendMeasurementKeepsTheNewest(t *testing.T) {
	var st v1alpha1.RolloutStatus
	for i := range v1alpha1.MaxMeasurements + 5 {
		appendMeasurement(&st, v1alpha1.Measurement{Metric: "m", Step: int32(i)})
	}
	if len(st.Measurements) != v1alpha1.MaxMeasurements {
		t.Fatalf("%d measurements kept, want %d", len(st.Measurements), v1alpha1.MaxMeasurements)
	}
	if first, last := st.Measurements[0].Step, st.Measurements[len(st.Measurements)-1].Step; first != 5 || last != int32(v1alpha1.MaxMeasurements+4) {
		t.Errorf("kept steps %d..%d, want the newest, 5..%d", first, last, v1alpha1.MaxMeasurements+4)
	}
}

