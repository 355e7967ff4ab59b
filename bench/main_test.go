package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gocompile/internal/testcache"
)

// TestMain keeps compiled artifacts out of the user's cache directory.
func TestMain(m *testing.M) { testcache.Main(m) }

// TestQuickSuiteCPU runs the whole suite with -quick on the CPU, one call
// per repetition, and checks the table, the JSON and the chart.
func TestQuickSuiteCPU(t *testing.T) {
	dir := t.TempDir()
	jsonPath, chartPath := filepath.Join(dir, "out.json"), filepath.Join(dir, "speedups.png")
	var out bytes.Buffer
	err := run([]string{"-device", "cpu", "-quick", "-iters", "1", "-reps", "1", "-json", jsonPath, "-chart", chartPath}, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}

	// The table: a header, a rule, 9 workload rows, then the copy line.
	names := []string{"pointwise_gelu_chain_16M", "bias_gelu_8192x4096", "softmax_8192x4096",
		"layernorm_8192x4096", "rmsnorm_8192x4096", "sum_rows_8192x4096", "sum_all_64M",
		"softmax_bf16_8192x4096", "softmax_small_32x1024"}
	lines := strings.Split(out.String(), "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "workload ") {
			start = i + 2
			break
		}
	}
	if start < 0 || start+len(names) >= len(lines) {
		t.Fatalf("no table header in the output")
	}
	for i, name := range names {
		if f := strings.Fields(lines[start+i]); len(f) < 10 || f[0] != name {
			t.Errorf("table row %d = %q, want workload %s with 10 columns", i, lines[start+i], name)
		}
	}
	if l := lines[start+len(names)]; !strings.HasPrefix(l, "copy_bandwidth ") {
		t.Errorf("line after the workloads = %q, want the copy bandwidth", l)
	}

	// The JSON: every field bench/pytorch/bench.py also writes.
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]any
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	for _, k := range []string{"device", "copy_GBs", "copy_us", "copy_bytes", "copy_method", "rows", "quick"} {
		if _, ok := res[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if g, _ := res["copy_GBs"].(float64); g <= 0 {
		t.Errorf("copy_GBs = %v, want > 0", res["copy_GBs"])
	}
	rows, _ := res["rows"].([]any)
	if len(rows) != len(names) {
		t.Fatalf("JSON has %d rows, want %d", len(rows), len(names))
	}
	for i, r := range rows {
		row, _ := r.(map[string]any)
		if row["name"] != names[i] {
			t.Errorf("row %d name = %v, want %s", i, row["name"], names[i])
		}
		for _, k := range []string{"eager_ms", "compiled_ms", "eager_us", "compiled_us", "eager_GBs",
			"compiled_GBs", "compiled_pct_of_copy", "speedup", "first_call_s", "bytes", "max_abs_diff"} {
			v, ok := row[k].(float64)
			if !ok {
				t.Errorf("row %s: %q missing or not a number: %v", names[i], k, row[k])
				continue
			}
			if k != "max_abs_diff" && !(v > 0) {
				t.Errorf("row %s: %s = %v, want > 0", names[i], k, v)
			}
		}
		// Eager and compiled must agree (softmax outputs are in [0, 1]; sums of 4M normals are O(1e3)).
		if d, _ := row["max_abs_diff"].(float64); !(d < 0.05) {
			t.Errorf("row %s: eager and compiled differ by %v", names[i], d)
		}
	}

	// The chart: a PNG file.
	png, err := os.ReadFile(chartPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("%s is not a PNG", chartPath)
	}
}

func TestBadFlags(t *testing.T) {
	var out bytes.Buffer
	for _, args := range [][]string{{"-device", "tpu"}, {"-iters", "-1"}, {"extra"}, {"-llm", "huge"}, {"-llm", "tiny/int8"}, {"-batches", "1,0"}, {"-batches", "x"}} {
		if err := run(args, &out); err == nil {
			t.Errorf("run(%q) succeeded, want an error", args)
		}
	}
}

// -llm times the tiny decoder's decode step at batch 1, 4 and 16,
// reports its share of the bandwidth roofline, and times the prefill; a
// bad -batches is refused.
func TestLLMDecodeCPU(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-llm", "tiny/float32", "-device", "cpu", "-iters", "2", "-reps", "1"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"decode step of the tiny config", "% of roofline", "\n1 ", "\n4 ", "\n16 ", "prefill of 64 tokens (batch 1)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
}
