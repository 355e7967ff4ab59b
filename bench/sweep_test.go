package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gocompile/tensor"
)

func TestSplitCases(t *testing.T) {
	for _, n := range []int{1, 5, 7, 30, 119, 120, 121, 500} {
		counts := splitCases(n)
		sum := 0
		for i, c := range counts {
			sum += c
			if n >= len(sweepCategories) && c < 1 {
				t.Errorf("splitCases(%d): category %s has no case", n, sweepCategories[i].name)
			}
		}
		if sum != n {
			t.Errorf("splitCases(%d) = %v, sums to %d", n, counts, sum)
		}
	}
}

// TestSweepDeterministic: one seed, one case list; another seed, another
// list; fewer cases are a prefix of each category's cases.
func TestSweepDeterministic(t *testing.T) {
	a, b := GenerateSweep(7, defaultSweepCases, false), GenerateSweep(7, defaultSweepCases, false)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two GenerateSweep(7, 120) differ")
	}
	if c := GenerateSweep(8, defaultSweepCases, false); reflect.DeepEqual(a, c) {
		t.Fatal("seeds 7 and 8 give the same cases")
	}
	byID := map[string]SweepCase{}
	for _, c := range a {
		if _, dup := byID[c.ID]; dup {
			t.Fatalf("case id %s twice", c.ID)
		}
		byID[c.ID] = c
	}
	for _, c := range GenerateSweep(7, 30, false) {
		if !reflect.DeepEqual(c, byID[c.ID]) {
			t.Errorf("case %s of 30 differs from case %s of 120", c.ID, c.ID)
		}
	}
}

// TestSweepCoverage checks what the sweep promises for a few seeds: at
// least 120 cases by default, every category and dtype, inputs of 16 MB
// or more except in latency cases, permutations, broadcasts of 2-D to 5-D,
// reductions over dim 0, middle dims, several dims and the last, rows of
// 1 to 200,000 elements.
func TestSweepCoverage(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 2026} {
		cases := GenerateSweep(seed, defaultSweepCases, false)
		if len(cases) < 120 {
			t.Fatalf("seed %d: %d cases, want >= 120", seed, len(cases))
		}
		cats, dtypes, ranks := map[string]int{}, map[string]int{}, map[string]map[int]bool{}
		var reducePats = map[string]bool{}
		minRow, maxRow := maxRowLen+1, 0
		for _, c := range cases {
			cats[c.Category]++
			dtypes[c.DType]++
			biggest := 0
			for _, in := range c.Inputs {
				dt, err := parseDType(in.DType)
				if err != nil {
					t.Fatal(err)
				}
				biggest = max(biggest, numel(in.Storage)*dt.Size())
				if in.Perm != nil && !slices.Equal(permute(in.Storage, in.Perm), in.Shape) {
					t.Errorf("%s: input %s storage %v permuted %v is not %v", c.ID, in.Name, in.Storage, in.Perm, in.Shape)
				}
			}
			if c.Latency != (biggest < minCaseBytes) {
				t.Errorf("%s: largest input %d bytes, latency %v", c.ID, biggest, c.Latency)
			}
			if c.Latency && c.Category != "odd" {
				t.Errorf("%s: a latency case outside the odd category", c.ID)
			}
			if biggest > 2*maxCaseBytes {
				t.Errorf("%s: an input of %d bytes", c.ID, biggest)
			}
			if ranks[c.Category] == nil {
				ranks[c.Category] = map[int]bool{}
			}
			ranks[c.Category][len(c.Inputs[0].Shape)] = true
			last := c.Steps[len(c.Steps)-1]
			switch c.Category {
			case "pointwise-permuted":
				permuted := false
				for _, in := range c.Inputs {
					permuted = permuted || in.Perm != nil
				}
				for _, s := range c.Steps {
					permuted = permuted || s.Op == "permute" || s.Op == "t"
				}
				if !permuted {
					t.Errorf("%s: no permuted operand: %s", c.ID, c.Desc)
				}
			case "pointwise-broadcast":
				if len(c.Inputs) < 2 || numel(c.Inputs[1].Shape) >= numel(c.Inputs[0].Shape) {
					t.Errorf("%s: no broadcast operand: %v", c.ID, c.Inputs)
				}
				if n := len(c.Steps); n < 2 || n > 4 {
					t.Errorf("%s: %d ops, want 2 to 4", c.ID, n)
				}
			case "reduce":
				for _, s := range c.Steps {
					r := len(c.Inputs[0].Shape)
					switch {
					case s.Dim != nil:
						reducePats["argmax"] = true
					case s.Op == "permute" || len(s.Dims) == 0:
					case len(s.Dims) > 1:
						reducePats["several"] = true
					case s.Dims[0] == 0:
						reducePats["dim 0"] = true
					case s.Dims[0] == r-1:
						reducePats["last"] = true
					default:
						reducePats["middle"] = true
					}
				}
			case "row":
				l := c.Inputs[0].Shape[len(c.Inputs[0].Shape)-1]
				minRow, maxRow = min(minRow, l), max(maxRow, l)
				if last.Dim != nil && *last.Dim != len(c.Inputs[0].Shape)-1 {
					t.Errorf("%s: not over the last dim: %s", c.ID, c.Desc)
				}
			}
		}
		for _, cat := range sweepCategories {
			if cats[cat.name] == 0 {
				t.Errorf("seed %d: no %s case", seed, cat.name)
			}
		}
		for _, dt := range []string{"float32", "bfloat16", "float16"} {
			if dtypes[dt] == 0 {
				t.Errorf("seed %d: no %s case", seed, dt)
			}
		}
		if dtypes["float32"] < len(cases)/3 {
			t.Errorf("seed %d: %d float32 cases of %d, want the most", seed, dtypes["float32"], len(cases))
		}
		for _, cat := range []string{"pointwise-permuted", "pointwise-broadcast"} {
			for r := 2; r <= 5; r++ {
				if !ranks[cat][r] {
					t.Errorf("seed %d: no rank-%d %s case", seed, r, cat)
				}
			}
		}
		for _, p := range []string{"argmax", "several", "dim 0", "last", "middle"} {
			if !reducePats[p] {
				t.Errorf("seed %d: no reduction over %s", seed, p)
			}
		}
		if minRow > 100 || maxRow < 20000 || maxRow > maxRowLen {
			t.Errorf("seed %d: rows of %d to %d elements, want a spread within 1 to %d", seed, minRow, maxRow, maxRowLen)
		}
	}
}

func permute(s, p []int) []int {
	out := make([]int, len(p))
	for i, v := range p {
		out[i] = s[v]
	}
	return out
}

// TestSweepProgram checks that a case's steps run the code its Desc
// shows: the same values as that code written by hand.
func TestSweepProgram(t *testing.T) {
	c := SweepCase{
		Inputs: []SweepInput{
			{Name: "a", Shape: []int{3, 4, 5}, Storage: []int{5, 3, 4}, Perm: []int{1, 2, 0}, DType: "float32"},
			{Name: "b", Shape: []int{3, 1, 5}, Storage: []int{3, 1, 5}, DType: "float32"},
		},
		Steps: []SweepStep{
			{Op: "mul", Args: []int{0, 1}},
			{Op: "gelu", Args: []int{2}},
			{Op: "var", Args: []int{3}, Dims: []int{0, 2}, Scalar: ptrFloat(1)},
			{Op: "add_scalar", Args: []int{4}, Scalar: ptrFloat(0.5)},
		},
	}
	want := "v0 := a.Mul(b); v1 := v0.GELU(); v2 := v1.Var([]int{0, 2}, 1, false); return v2.AddScalar(0.5)"
	if got := c.program(); got != want {
		t.Errorf("program() = %q, want %q", got, want)
	}
	xs, _, err := sweepInputs(c, 1, tensor.CPU, false)
	if err != nil {
		t.Fatal(err)
	}
	a, b := xs[0], xs[1]
	if a.IsContiguous() {
		t.Error("input a should be a permuted view")
	}
	ref := a.Mul(b).GELU().Var([]int{0, 2}, 1, false).AddScalar(0.5)
	if e := sweepErr(c.eval(xs), ref); e != 0 {
		t.Errorf("eval differs from the hand-written program by %g", e)
	}
}

// TestSweepQuickCPU runs the sweep with -quick on the CPU (one call per
// repetition; 120 cases, 20 with -short): every case must match eager and
// the float64 reference, and the tables and JSON files must hold them.
func TestSweepQuickCPU(t *testing.T) {
	n := "120"
	if testing.Short() {
		n = "20"
	}
	dir := t.TempDir()
	jsonPath, casesPath := filepath.Join(dir, "sweep.json"), filepath.Join(dir, "cases.json")
	var out bytes.Buffer
	err := run([]string{"-sweep", "-device", "cpu", "-quick", "-cases", n, "-iters", "1", "-reps", "1", "-seed", "3",
		"-json", jsonPath, "-cases-json", casesPath}, &out)
	if err != nil {
		t.Log("\n" + out.String())
		t.Fatal(err)
	}
	text := out.String()
	for _, s := range []string{"copy bandwidth:", "category ", "worst ten by % of copy:", "pointwise-permuted ", "reduce ", "row ", "odd ", "all "} {
		if !strings.Contains(text, s) {
			t.Errorf("the output lacks %q", s)
		}
	}

	var list SweepCaseList
	b, err := os.ReadFile(casesPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	var res SweepResult
	if b, err = os.ReadFile(jsonPath); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if len(list.Cases) != len(res.Rows) || len(res.Cases) != len(res.Rows) || list.Seed != 3 || !list.Quick {
		t.Fatalf("%d cases listed, %d in the result, %d rows; seed %d quick %v", len(list.Cases), len(res.Cases), len(res.Rows), list.Seed, list.Quick)
	}
	if res.CopyGBs <= 0 {
		t.Errorf("copy_GBs = %v", res.CopyGBs)
	}
	for i, r := range res.Rows {
		if r.ID != list.Cases[i].ID || r.Desc != list.Cases[i].Desc {
			t.Errorf("row %d is %s, the list's case %s", i, r.ID, list.Cases[i].ID)
		}
		if !(r.EagerUs > 0 && r.CompiledUs > 0 && r.Bytes > 0 && r.PctOfCopy > 0 && r.Kernels > 0) || len(r.Mismatch) > 0 {
			t.Errorf("%s: %+v", r.ID, r)
		}
	}
	if last := res.Categories[len(res.Categories)-1]; last.Category != "all" || last.Cases != len(res.Rows) || last.Mismatches != 0 {
		t.Errorf("summary %+v", last)
	}
}

func TestSweepBadFlags(t *testing.T) {
	var out bytes.Buffer
	for _, args := range [][]string{{"-sweep", "-cases", "0"}, {"-sweep", "-list"}} {
		if err := run(args, &out); err == nil {
			t.Errorf("run(%q) succeeded, want an error", args)
		}
	}
}

// The random products are the same for a seed, cover 1 to 16 rows, the
// three dtypes and odd sizes, and stay in the stated ranges.
func TestGemvRandomCases(t *testing.T) {
	a, b := gemvRandom(60, 7), gemvRandom(60, 7)
	if !slices.Equal(a, b) {
		t.Fatal("one seed gave two case lists")
	}
	if slices.Equal(a, gemvRandom(60, 8)) {
		t.Error("two seeds gave one case list")
	}
	dts, odd := map[tensor.DType]bool{}, 0
	for _, c := range a {
		if c.rows < 1 || c.rows > 16 || c.n < 256 || c.n > 16384+7 || c.k < 256 || c.k > 8192+7 {
			t.Errorf("case %+v out of range", c)
		}
		dts[c.dt] = true
		if c.n%8 != 0 || c.k%8 != 0 {
			odd++
		}
	}
	if len(dts) != 3 || odd == 0 {
		t.Errorf("%d dtypes and %d cases with an odd size, want 3 and some", len(dts), odd)
	}
}
