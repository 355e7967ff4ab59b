package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"gocompile/internal/testcache"
	"gocompile/tensor"
)

// TestMain keeps compiled artifacts out of the user's cache directory.
func TestMain(m *testing.M) { testcache.Main(m) }

// testConfig is the default model on the default device (GOCOMPILE_DEVICE
// or the CPU), logging into the test's log.
func testConfig(t *testing.T) config {
	dev := tensor.DefaultDevice()
	return config{Device: dev, Seed: 1, Logger: log.New(testWriter{t}, "server: ", 0)}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// do sends one request to h and returns the status and body.
func do(t *testing.T, h http.Handler, method, path, body string) (int, string, http.Header) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String(), rec.Header()
}

// rowsJSON returns a JSON array of rows rows of n values each.
func rowsJSON(rows, n int, v string) string {
	row := "[" + strings.TrimSuffix(strings.Repeat(v+",", n), ",") + "]"
	return "[" + strings.TrimSuffix(strings.Repeat(row+",", rows), ",") + "]"
}

func TestValidation(t *testing.T) {
	s := newServer(testConfig(t))
	h := s.handler()
	row := func(vals ...string) string {
		v := make([]string, 64)
		for i := range v {
			v[i] = "0.5"
		}
		copy(v, vals)
		return "[" + strings.Join(v, ",") + "]"
	}
	tests := []struct {
		name, method, body string
		status             int
		wants              []string // substrings of the error message
	}{
		{"wrong method", "GET", "", 405, []string{"method GET not allowed", "POST"}},
		{"wrong method PUT", "PUT", `{"inputs": [` + row() + `]}`, 405, []string{"method PUT not allowed"}},
		{"bad JSON", "POST", `{"inputs": [[1, 2`, 400, []string{"invalid JSON"}},
		{"not JSON", "POST", `hello`, 400, []string{"invalid JSON"}},
		{"trailing data", "POST", `{"inputs": [` + row() + `]} {}`, 400, []string{"invalid JSON", "after the JSON object"}},
		{"unknown field", "POST", `{"input": [` + row() + `]}`, 400, []string{"invalid JSON", `unknown field "input"`}},
		{"inputs not an array", "POST", `{"inputs": "x"}`, 400, []string{"invalid JSON"}},
		{"string value", "POST", `{"inputs": [` + row(`"abc"`) + `]}`, 400, []string{"invalid JSON", `"abc" is not a number`}},
		{"null value", "POST", `{"inputs": [` + row(`null`) + `]}`, 400, []string{"null is not a number"}},
		{"missing inputs", "POST", `{}`, 400, []string{`missing "inputs"`}},
		{"null inputs", "POST", `{"inputs": null}`, 400, []string{`missing "inputs"`}},
		{"empty inputs", "POST", `{"inputs": []}`, 400, []string{`"inputs" is empty`, "1 to 256 rows"}},
		{"wrong row length", "POST", `{"inputs": [[1, 2, 3]]}`, 422, []string{"row 0 has 3 values", "expected length 64"}},
		{"ragged rows", "POST", `{"inputs": [` + row() + `, [1, 2]]}`, 422, []string{"row 1 has 2 values", "expected length 64"}},
		{"empty row", "POST", `{"inputs": [[]]}`, 422, []string{"row 0 has 0 values", "expected length 64"}},
		{"too many rows", "POST", `{"inputs": ` + rowsJSON(257, 64, "0") + `}`, 413, []string{"too many rows: 257", "at most 256"}},
		{"body too large", "POST", `{"inputs": ` + rowsJSON(2000, 64, "0.123456789") + `}`, 413, []string{"request body too large", "limit is 1048576 bytes"}},
		{"NaN", "POST", `{"inputs": [` + row("1", `"NaN"`) + `]}`, 422, []string{"inputs[0][1] is NaN", "finite"}},
		{"Infinity", "POST", `{"inputs": [` + row() + "," + row(`"-Infinity"`) + `]}`, 422, []string{"inputs[1][0] is -Inf", "finite"}},
		{"float32 overflow", "POST", `{"inputs": [` + row("0", "0", "1e39") + `]}`, 422, []string{"inputs[0][2] is +Inf", "finite"}},
		{"float64 overflow", "POST", `{"inputs": [` + row("1e400") + `]}`, 422, []string{"inputs[0][0] is +Inf"}},

		// Hostile input: none may take the server down, each gets one line.
		{"empty body", "POST", ``, 400, []string{"invalid JSON", "EOF"}},
		{"only spaces", "POST", " \n\t ", 400, []string{"invalid JSON", "EOF"}},
		{"a batch field", "POST", `{"inputs": [` + row() + `], "batch": 1000000}`, 400, []string{`unknown field "batch"`}},
		{"rows are numbers", "POST", `{"inputs": [1, 2]}`, 400, []string{"unexpected number", "want {\"inputs\""}},
		{"3-D inputs", "POST", `{"inputs": [[[1,` + "\n" + `2]]]}`, 400, []string{"input value [1, 2] is not a number"}},
		{"deep nesting", "POST", `{"inputs": ` + strings.Repeat("[", 100000), 400, []string{"invalid JSON", "exceeded max depth"}},
		{"long string value", "POST", `{"inputs": [` + row(`"`+strings.Repeat("x", 100000)+`"`) + `]}`, 400, []string{"input value \"xxxx", "… is not a number"}},
		{"number in a string", "POST", `{"inputs": [` + row(`"1.5"`) + `]}`, 400, []string{`"1.5" is not a number`}},
		{"bad escape", "POST", `{"inputs": [` + row(`"\x"`) + `]}`, 400, []string{"invalid JSON", "escape"}},
		{"many empty rows", "POST", `{"inputs": [` + strings.Repeat("[],", 99999) + `[]]}`, 413, []string{"too many rows: 100000", "at most 256"}},
		{"huge exponent", "POST", `{"inputs": [` + row("1e999999999999") + `]}`, 422, []string{"inputs[0][0] is +Inf"}},
		{"negative overflow", "POST", `{"inputs": [` + row("5", "-1e39") + `]}`, 422, []string{"inputs[0][1] is -Inf"}},
		{"too large after the object", "POST", `{"inputs": [` + row() + `]}` + strings.Repeat(" ", 1<<20), 413, []string{"request body too large"}},
		{"outputs overflow", "POST", `{"inputs": ` + rowsJSON(1, 64, "3e38") + `}`, 422, []string{"the inputs are too large"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body, hdr := do(t, h, tc.method, "/v1/predict", tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d (body %.300s)", status, tc.status, body)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			var e errorResponse
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" {
				t.Fatalf("body %q is not {\"error\": ...}: %v", body, err)
			}
			for _, w := range tc.wants {
				if !strings.Contains(e.Error, w) {
					t.Errorf("error %q does not mention %q", e.Error, w)
				}
			}
			if strings.ContainsAny(e.Error, "\r\n") || len(e.Error) > 400 {
				t.Errorf("error of %d bytes is not one short line: %.500q", len(e.Error), e.Error)
			}
			if status == 405 && hdr.Get("Allow") != "POST" {
				t.Errorf("Allow = %q, want POST", hdr.Get("Allow"))
			}
		})
	}
	// A body declared larger than the limit is refused before it is read.
	req := httptest.NewRequest("POST", "/v1/predict", strings.NewReader(`{"inputs": [`+row()+`]}`))
	req.ContentLength = 1 << 40
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if want := "1099511627776 bytes declared, the limit is 1048576 bytes"; rec.Code != 413 || !strings.Contains(rec.Body.String(), want) {
		t.Errorf("declared length 1 TiB: %d %s, want 413 saying %q", rec.Code, rec.Body, want)
	}

	// Every refused request was counted by status, none compiled anything.
	m := s.metrics()
	if m.Requests != int64(len(tests)+1) || m.ByStatus["200"] != 0 {
		t.Errorf("metrics count %d requests %v, want %d refused", m.Requests, m.ByStatus, len(tests)+1)
	}
	if m.Compile.Compiles != 2 {
		t.Errorf("compiles = %d, want 2 (the warm-up)", m.Compile.Compiles)
	}
}

// Whatever the body, decodeRequest returns 1 to maxRows rows of finite
// values that survive a JSON round trip bit for bit, or refuses with a 4xx
// and one short line. It never panics.
func FuzzDecodeRequest(f *testing.F) {
	const in, maxRows, limit = 3, 4, 4096
	for _, body := range []string{
		`{"inputs": [[1, 2, 3]]}`,
		`{"inputs": [[1, 2.5, -3], [3.4e38, -0, 1e-46], [0, 0, 0]]}`,
		`{"inputs": [[1, "NaN", "-Infinity"]]}`,
		`{"inputs": [[1e39, 2, 3]]}`,
		`{"inputs": [[1, 2]]}`,
		`{"inputs": [[1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 2, 3]]}`,
		`{"inputs": []}`,
		`{"inputs": null}`,
		`{"inputs": [[[1], 2, 3]]}`,
		`{"inputs": [[1, 2, 3]]} {}`,
		`{"inputs": [[1, 2, 3]], "batch": 9}`,
		`{"inputs": [[1, "2", 3]]}`,
		`{}`,
		`[`,
		``,
	} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(body)), limit)
		flat, rows, err := decodeRequest(r, in, maxRows)
		if err != nil {
			var re *requestError
			if !errors.As(err, &re) || re.status < 400 || re.status > 499 {
				t.Fatalf("error %v (%T) is not a 4xx *requestError", err, err)
			}
			if strings.ContainsAny(re.msg, "\r\n") || len(re.msg) > 400 || !utf8.ValidString(re.msg) {
				t.Fatalf("error of %d bytes is not one short line: %q", len(re.msg), re.msg)
			}
			if flat != nil || rows != 0 {
				t.Fatalf("refused with %d rows, %d values", rows, len(flat))
			}
			return
		}
		if rows < 1 || rows > maxRows || len(flat) != rows*in {
			t.Fatalf("%d rows, %d values: want 1 to %d rows of %d", rows, len(flat), maxRows, in)
		}
		back := make([][]float32, rows)
		for i := range back {
			back[i] = flat[i*in : (i+1)*in]
			for _, v := range back[i] {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("accepted %v", v)
				}
			}
		}
		again, err := json.Marshal(map[string]any{"inputs": back})
		if err != nil {
			t.Fatal(err)
		}
		flat2, rows2, err := decodeRequest(bytes.NewReader(again), in, maxRows)
		if err != nil || rows2 != rows {
			t.Fatalf("%s read back: %d rows, %v", again, rows2, err)
		}
		for i := range flat {
			if math.Float32bits(flat[i]) != math.Float32bits(flat2[i]) {
				t.Fatalf("value %d is %v, %v after a round trip through %s", i, flat[i], flat2[i], again)
			}
		}
	})
}

// replyWriter calls onWrite when the handler first writes the body, the
// earliest a client could read its reply.
type replyWriter struct {
	*httptest.ResponseRecorder
	onWrite func()
}

func (w *replyWriter) Write(b []byte) (int, error) {
	if w.onWrite != nil {
		w.onWrite()
		w.onWrite = nil
	}
	return w.ResponseRecorder.Write(b)
}

// Every /v1/predict request is in /metrics before its reply is written: a
// client that reads /metrics after its last answer sees all its requests.
func TestCountedBeforeReply(t *testing.T) {
	var logs bytes.Buffer
	cfg := testConfig(t)
	cfg.Logger = log.New(&logs, "", 0)
	s := newServer(cfg)
	compiled := s.predict
	h := s.handler()
	ok := `{"inputs": ` + rowsJSON(64, 64, "0.5") + `}` // a reply larger than net/http's buffer
	tests := []struct {
		name, method, body string
		predict            func(*tensor.Tensor) *tensor.Tensor
		status             int
	}{
		{"ok", "POST", ok, compiled, 200},
		{"bad JSON", "POST", `{`, compiled, 400},
		{"wrong method", "GET", "", compiled, 405},
		{"wrong row length", "POST", `{"inputs": [[1]]}`, compiled, 422},
		{"panic", "POST", ok, func(*tensor.Tensor) *tensor.Tensor { panic("boom") }, 500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s.predict = tc.predict
			defer func() { s.predict = compiled }()
			before := s.metrics().ByStatus[strconv.Itoa(tc.status)]
			counted := false
			w := &replyWriter{httptest.NewRecorder(), func() {
				counted = s.metrics().ByStatus[strconv.Itoa(tc.status)] == before+1
			}}
			h.ServeHTTP(w, httptest.NewRequest(tc.method, "/v1/predict", strings.NewReader(tc.body)))
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if !counted {
				t.Errorf("the %d reply was written before the request was counted", tc.status)
			}
			if m := s.metrics().ByStatus[strconv.Itoa(tc.status)]; m != before+1 {
				t.Errorf("%d×%d counted after the request, want %d", m, tc.status, before+1)
			}
		})
	}
}

// A prediction is exactly the plain model's output: the compiled graph
// runs the same kernels, and float32 survives JSON both ways.
func TestPredictMatchesEagerModel(t *testing.T) {
	s := newServer(testConfig(t))
	h := s.handler()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, batch := range []int{1, 2, 5, 64, 256, 7} {
		inputs := make([][]float32, batch)
		for i := range inputs {
			inputs[i] = make([]float32, 64)
			for j := range inputs[i] {
				inputs[i][j] = float32(rng.NormFloat64() * 3)
			}
		}
		body, _ := json.Marshal(map[string]any{"inputs": inputs})
		status, resp, _ := do(t, h, "POST", "/v1/predict", string(body))
		if status != 200 {
			t.Fatalf("batch %d: status %d: %s", batch, status, resp)
		}
		var pr predictResponse
		if err := json.Unmarshal([]byte(resp), &pr); err != nil {
			t.Fatal(err)
		}
		if pr.Batch != batch || len(pr.Outputs) != batch {
			t.Fatalf("batch %d: got batch %d, %d rows", batch, pr.Batch, len(pr.Outputs))
		}
		want := s.reference(inputs)
		for i := range want {
			if len(pr.Outputs[i]) != 16 {
				t.Fatalf("row %d has %d outputs, want 16", i, len(pr.Outputs[i]))
			}
			for j := range want[i] {
				if d := math.Abs(float64(pr.Outputs[i][j]) - float64(want[i][j])); !(d <= 1e-5*(math.Abs(float64(want[i][j]))+1)) {
					t.Fatalf("batch %d row %d col %d: got %v, want %v (plain model)", batch, i, j, pr.Outputs[i][j], want[i][j])
				}
			}
		}
	}
	if c := s.stats.Compiles.Load(); c != 2 {
		t.Errorf("compiles = %d after batches 1..256, want 2 (warm-up only)", c)
	}
	if r := s.stats.Recompiles.Load(); r != 1 {
		t.Errorf("recompiles = %d, want 1 (the batch-of-one entry)", r)
	}
}

func TestHealthzAndMetrics(t *testing.T) {
	s := newServer(testConfig(t))
	h := s.handler()
	if status, body, _ := do(t, h, "GET", "/healthz", ""); status != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("healthz: %d %q", status, body)
	}
	if status, _, _ := do(t, h, "POST", "/healthz", ""); status != 405 {
		t.Fatalf("POST healthz: %d, want 405", status)
	}
	if status, body, _ := do(t, h, "GET", "/nope", ""); status != 404 || !strings.Contains(body, "/v1/predict") {
		t.Fatalf("unknown path: %d %s", status, body)
	}
	ok := `{"inputs": ` + rowsJSON(3, 64, "0.25") + `}`
	for range 5 {
		if status, body, _ := do(t, h, "POST", "/v1/predict", ok); status != 200 {
			t.Fatalf("predict: %d %s", status, body)
		}
	}
	do(t, h, "POST", "/v1/predict", `{}`)
	status, body, hdr := do(t, h, "GET", "/metrics", "")
	if status != 200 || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("metrics: %d %s", status, body)
	}
	var m struct {
		Requests          int64            `json:"requests"`
		ByStatus          map[string]int64 `json:"by_status"`
		RequestsPerSecond float64          `json:"requests_per_second"`
		Latency           latencyStats     `json:"latency_us"`
		Compile           compileStats     `json:"compile"`
		Device            string           `json:"device"`
		Memory            json.RawMessage  `json:"memory"`
		Model             modelInfo        `json:"model"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("metrics are not JSON: %v\n%s", err, body)
	}
	t.Logf("metrics: %s", body)
	if m.Requests != 6 || m.ByStatus["200"] != 5 || m.ByStatus["400"] != 1 {
		t.Errorf("requests %d by status %v, want 6: 5×200, 1×400", m.Requests, m.ByStatus)
	}
	if m.Latency.Window != 5 || !(0 < m.Latency.P50 && m.Latency.P50 <= m.Latency.P90 && m.Latency.P90 <= m.Latency.P99 && m.Latency.P99 <= m.Latency.Max) {
		t.Errorf("latency %+v: want 5 successful predictions, 0 < p50 <= p90 <= p99 <= max", m.Latency)
	}
	if m.RequestsPerSecond <= 0 {
		t.Errorf("requests_per_second = %v", m.RequestsPerSecond)
	}
	// 2 warm-up calls + 5 predictions; the warm-up compiled twice.
	if m.Compile != (compileStats{Calls: 7, Compiles: 2, Recompiles: 1}) {
		t.Errorf("compile stats %+v, want 7 calls, 2 compiles, 1 recompile", m.Compile)
	}
	if m.Model != (modelInfo{In: 64, Hidden: 256, Out: 16, Layers: 4}) {
		t.Errorf("model %+v", m.Model)
	}
	if s.cfg.Device == tensor.CPU {
		if m.Device != "cpu" || string(m.Memory) != `"cpu"` {
			t.Errorf("device %q memory %s, want cpu", m.Device, m.Memory)
		}
	} else if !bytes.Contains(m.Memory, []byte("Allocated")) {
		t.Errorf("memory %s: want the GPU allocator's statistics", m.Memory)
	}
}

func TestPercentiles(t *testing.T) {
	d := make([]time.Duration, 100)
	for i := range d {
		d[i] = time.Duration(100-i) * time.Microsecond
	}
	st := percentiles(d)
	if st != (latencyStats{Window: 100, P50: 50, P90: 90, P99: 99, Max: 100}) {
		t.Fatalf("percentiles of 1..100µs: %+v", st)
	}
	// The window is a ring: only the latest Window latencies count.
	s := &server{lat: make([]time.Duration, 3), byStatus: map[int]int64{}, done: make(chan struct{}), start: time.Now()}
	for _, us := range []int{1000, 1, 2, 3} {
		s.record(200, time.Duration(us)*time.Microsecond)
	}
	if m := s.metrics(); m.Latency.Window != 3 || m.Latency.Max != 3 {
		t.Fatalf("ring: %+v, want the last 3 (max 3µs)", m.Latency)
	}
}

// Panics in the model become 500s, a *tensor.Error included, and the
// server goes on serving.
func TestModelErrorsDoNotCrash(t *testing.T) {
	var logs bytes.Buffer
	cfg := testConfig(t)
	cfg.Logger = log.New(&logs, "", 0)
	s := newServer(cfg)
	compiled := s.predict
	h := s.handler()
	ok := `{"inputs": ` + rowsJSON(2, 64, "1") + `}`

	s.predict = func(x *tensor.Tensor) *tensor.Tensor {
		return x.Linear(tensor.Zeros(tensor.Float32, 16, 3), nil) // wrong inner size: *tensor.Error
	}
	status, body, _ := do(t, h, "POST", "/v1/predict", ok)
	if status != 500 || !strings.Contains(body, "model: ") || !strings.Contains(body, "Linear") {
		t.Errorf("tensor error: %d %s, want 500 naming the op", status, body)
	}

	s.predict = func(x *tensor.Tensor) *tensor.Tensor { panic("boom") }
	status, body, _ = do(t, h, "POST", "/v1/predict", ok)
	if status != 500 || !strings.Contains(body, "internal server error") {
		t.Errorf("panic: %d %s, want 500", status, body)
	}
	if !strings.Contains(logs.String(), "panic serving POST /v1/predict: boom") {
		t.Errorf("the panic was not logged:\n%s", logs.String())
	}

	s.predict = compiled
	if status, body, _ = do(t, h, "POST", "/v1/predict", ok); status != 200 {
		t.Errorf("after the errors: %d %s", status, body)
	}
	if m := s.metrics(); m.ByStatus["500"] != 2 || m.ByStatus["200"] != 1 {
		t.Errorf("by status %v, want 2×500 and 1×200", m.ByStatus)
	}
}

// startServer serves s on a real loopback listener and returns its base
// URL and the http.Server.
func startServer(t *testing.T, s *server) (string, *http.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := s.httpServer()
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), srv
}

// Shutdown lets in-flight requests finish; Done closes after Requests.
func TestGracefulShutdown(t *testing.T) {
	cfg := testConfig(t)
	cfg.Requests = 2
	s := newServer(cfg)
	compiled := s.predict
	entered := make(chan struct{})
	var calls atomic.Int64
	s.predict = func(x *tensor.Tensor) *tensor.Tensor {
		if calls.Add(1) == 2 { // the second request is slow
			close(entered)
			time.Sleep(300 * time.Millisecond)
		}
		return compiled(x)
	}
	base, srv := startServer(t, s)
	client := newLoadClient(2)
	defer client.CloseIdleConnections()
	ok := []byte(`{"inputs": ` + rowsJSON(4, 64, "1") + `}`)

	if err := predictOnce(context.Background(), client, base+"/v1/predict", ok, 4, nil, 64); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
		t.Fatal("Done closed after 1 of 2 requests")
	default:
	}
	result := make(chan error, 1)
	go func() { result <- predictOnce(context.Background(), client, base+"/v1/predict", ok, 4, nil, 64) }()
	<-entered // the request is in the model
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if err := <-result; err != nil {
		t.Fatalf("in-flight request during shutdown: %v", err)
	}
	select {
	case <-s.Done():
	case <-time.After(time.Second):
		t.Fatal("Done not closed after 2 requests")
	}
}

// TestLoad is the load test: 64 concurrent clients send 10000 predictions
// (1000 with -short) of pseudo-random batch sizes 1..64 to a server, with
// hidden layers 64 wide, on a loopback listener. Every answer must equal the plain model's, no
// request may fail, no request may recompile, and goroutines and heap
// must come back to where they were.
func TestLoad(t *testing.T) {
	requests, clients, maxBatch := 10000, 64, 64
	if testing.Short() {
		requests = 1000
	}
	cfg := testConfig(t)
	cfg.Requests = int64(requests) + 1 // with the request below
	cfg.Hidden = 64                    // the server under load is the point, not the matrix products
	s := newServer(cfg)
	base, srv := startServer(t, s)
	defer srv.Close()
	compilesBefore := s.stats.Compiles.Load()

	client := newLoadClient(clients)
	// One request to start the listener's goroutines, then measure.
	if err := predictOnce(context.Background(), client, base+"/v1/predict", []byte(`{"inputs": `+rowsJSON(1, 64, "0")+`}`), 1, nil, 64); err != nil {
		t.Fatal(err)
	}
	client.CloseIdleConnections()
	goroutinesBefore := settleGoroutines(0)
	heapBefore := heapAlloc()

	r := runLoad(context.Background(), client, loadConfig{URL: base, Requests: requests, Clients: clients,
		MaxBatch: maxBatch, Seed: 7, In: 64, Want: s.reference})
	if r.Errors > 0 {
		t.Errorf("%d of %d requests failed; first: %v", r.Errors, r.Requests, r.FirstErr)
	}
	if r.Requests != requests {
		t.Errorf("sent %d requests, want %d", r.Requests, requests)
	}
	m := s.metrics()

	client.CloseIdleConnections()
	goroutinesAfter := settleGoroutines(goroutinesBefore + 2)
	heapAfter := heapAlloc()

	t.Logf("load: %d requests, %d clients, batch 1-%d, %d errors in %v: %.0f req/s",
		r.Requests, clients, maxBatch, r.Errors, r.Elapsed.Round(time.Millisecond), r.rps())
	t.Logf("client latency p50 %v p99 %v; server latency p50 %.0fµs p90 %.0fµs p99 %.0fµs (last %d)",
		r.percentile(50).Round(time.Microsecond), r.percentile(99).Round(time.Microsecond),
		m.Latency.P50, m.Latency.P90, m.Latency.P99, m.Latency.Window)
	t.Logf("goroutines before %d after %d; heap before %.1f MiB after %.1f MiB; compiles %d (recompiles %d), device %s, GOMAXPROCS %d",
		goroutinesBefore, goroutinesAfter, mib(heapBefore), mib(heapAfter), m.Compile.Compiles, m.Compile.Recompiles, m.Device, runtime.GOMAXPROCS(0))

	if m.Compile.Compiles > 3 || m.Compile.Compiles != compilesBefore {
		t.Errorf("compiles = %d (%d before the load): want <= 3 and none during the load", m.Compile.Compiles, compilesBefore)
	}
	if m.ByStatus["200"] != int64(requests+1) || len(m.ByStatus) != 1 {
		t.Errorf("server counted %v, want %d×200", m.ByStatus, requests+1)
	}
	if goroutinesAfter > goroutinesBefore+2 {
		t.Errorf("goroutines grew from %d to %d\n%s", goroutinesBefore, goroutinesAfter, goroutineDump())
	}
	if heapAfter > 2*heapBefore+16<<20 {
		t.Errorf("heap grew from %.1f MiB to %.1f MiB", mib(heapBefore), mib(heapAfter))
	}
	select {
	case <-s.Done():
	default:
		t.Errorf("Done not closed after %d requests", requests+1)
	}
}

// settleGoroutines waits up to 5 s for the goroutine count to drop to
// target (if > 0) and returns it.
func settleGoroutines(target int) int {
	deadline := time.Now().Add(5 * time.Second)
	n := runtime.NumGoroutine()
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		m := runtime.NumGoroutine()
		if (target > 0 && m <= target) || (target == 0 && m == n) {
			return m
		}
		n = m
	}
	return n
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func goroutineDump() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
