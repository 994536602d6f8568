package manager

import "testing"

func TestSoftMemoryLimit(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    int64
		wantOK  bool
		wantErr bool
	}{
		{name: "90% of the container limit", env: map[string]string{MemoryLimitEnv: "536870912"}, want: 483183820, wantOK: true},
		{name: "GOMEMLIMIT set by the operator wins", env: map[string]string{MemoryLimitEnv: "536870912", "GOMEMLIMIT": "300MiB"}},
		{name: "no limit known", env: map[string]string{}},
		{name: "not bytes", env: map[string]string{MemoryLimitEnv: "512Mi"}, wantErr: true},
		{name: "zero", env: map[string]string{MemoryLimitEnv: "0"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := SoftMemoryLimit(func(k string) string { return tt.env[k] })
			if (err != nil) != tt.wantErr || ok != tt.wantOK || got != tt.want {
				t.Errorf("SoftMemoryLimit() = %d, %v, %v; want %d, %v, error %v", got, ok, err, tt.want, tt.wantOK, tt.wantErr)
			}
		})
	}
}

func TestGCPercent(t *testing.T) {
	tests := []struct {
		name   string
		env    map[string]string
		want   int
		wantOK bool
	}{
		{name: "GOGC unset: the manager's default", env: map[string]string{}, want: DefaultGCPercent, wantOK: true},
		{name: "GOGC set by the operator wins", env: map[string]string{"GOGC": "100"}},
		{name: "GOGC=off is the operator's too", env: map[string]string{"GOGC": "off"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := GCPercent(func(k string) string { return tt.env[k] })
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("GCPercent() = %d, %v; want %d, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
