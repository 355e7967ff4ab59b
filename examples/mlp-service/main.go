// Command mlp-service is an HTTP inference server (net/http only, JSON in
// and out) that serves a compiled MLP to many concurrent clients.
//
// The model is an MLP of Linear layers with GELU between them (64 → 256 →
// 256 → 256 → 16 by default), its weights deterministic from a seed. It is
// compiled once at startup with tensor.Compile. A warm-up call marks the
// batch dim dynamic with tensor.MarkDynamic, so the first compile already
// serves every batch size >= 2; a second warm-up call with one row compiles
// the batch-of-one entry (size 1 stays specialised, as in PyTorch). After
// startup no request recompiles: /metrics shows compiles = 2.
//
//	go run ./examples/mlp-service                           # serve on 127.0.0.1:8080
//	go run ./examples/mlp-service -selftest -requests 10000 # load-test itself, print a summary
//
// Endpoints: POST /v1/predict, GET /metrics (JSON), GET /healthz. See
// README.md in this directory.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"

	"gocompile/tensor"
)

// config is what newServer needs.
type config struct {
	Device tensor.Device
	In     int    // input features
	Hidden int    // width of the hidden layers
	Out    int    // outputs
	Layers int    // Linear layers (>= 1); GELU follows all but the last
	Seed   uint64 // weight seed
	// Mode is the compilation mode: tensor.ReduceOverhead replays each
	// batch size's program as one CUDA graph (the first few sizes seen).
	Mode tensor.Mode

	MaxRows      int   // rows per request (default 256)
	MaxBodyBytes int64 // request body limit (default max(1 MiB, 32 bytes per value of MaxRows rows))
	Window       int   // latencies kept for percentiles (default 10000)
	// Requests, when > 0, makes the server close Done() after it has
	// answered that many /v1/predict requests (any status).
	Requests int64
	Logger   *log.Logger // default: log.Default()
}

func (c *config) fill() {
	if c.In == 0 {
		c.In = 64
	}
	if c.Hidden == 0 {
		c.Hidden = 256
	}
	if c.Out == 0 {
		c.Out = 16
	}
	if c.Layers == 0 {
		c.Layers = 4
	}
	if c.MaxRows == 0 {
		c.MaxRows = 256
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = max(1<<20, int64(c.MaxRows)*int64(c.In)*32)
	}
	if c.Window == 0 {
		c.Window = 10000
	}
	if c.Logger == nil {
		c.Logger = log.Default()
	}
}

// mlp is Layers Linear layers in torch.nn.Linear's layout, with GELU after
// every layer but the last.
type mlp struct {
	ws, bs []*tensor.Tensor
}

func newMLP(c config) *mlp {
	if c.In < 1 || c.Hidden < 1 || c.Out < 1 || c.Layers < 1 {
		panic(fmt.Sprintf("mlp-service: sizes must be positive (in %d, hidden %d, out %d, layers %d)", c.In, c.Hidden, c.Out, c.Layers))
	}
	g := tensor.NewGenerator(c.Seed)
	m := &mlp{}
	for i := range c.Layers {
		in, out := c.Hidden, c.Hidden
		if i == 0 {
			in = c.In
		}
		if i == c.Layers-1 {
			out = c.Out
		}
		scale := 1 / math.Sqrt(float64(in)) // keeps activations O(1)
		m.ws = append(m.ws, g.Randn(tensor.Float32, out, in).MulScalar(scale).ToDevice(c.Device))
		m.bs = append(m.bs, g.Randn(tensor.Float32, out).MulScalar(0.1).ToDevice(c.Device))
	}
	return m
}

// forward is the plain (eager) model: x [batch, in] → [batch, out].
func (m *mlp) forward(x *tensor.Tensor) *tensor.Tensor {
	for i := range m.ws {
		x = x.Linear(m.ws[i], m.bs[i])
		if i < len(m.ws)-1 {
			x = x.GELU()
		}
	}
	return x
}

// server serves one compiled model. It is safe for concurrent use.
type server struct {
	cfg   config
	model *mlp
	// predict is the compiled forward pass (tests may replace it).
	predict func(*tensor.Tensor) *tensor.Tensor
	stats   tensor.CompileStats
	start   time.Time

	mu       sync.Mutex
	lat      []time.Duration // ring of the latest successful predictions
	latNext  int
	latFull  bool
	byStatus map[int]int64

	answered atomic.Int64 // /v1/predict requests answered
	done     chan struct{}
	doneOnce sync.Once
}

// newServer builds and compiles the model and warms it up. It panics (with
// a *tensor.Error for device problems) if the model cannot be built.
func newServer(cfg config) *server {
	cfg.fill()
	s := &server{
		cfg:      cfg,
		model:    newMLP(cfg),
		start:    time.Now(),
		lat:      make([]time.Duration, cfg.Window),
		byStatus: map[int]int64{},
		done:     make(chan struct{}),
	}
	s.predict = tensor.Compile(s.model.forward, tensor.WithStats(&s.stats), tensor.WithMode(cfg.Mode))
	// Warm up: the batch dim is dynamic from the first compile (any size
	// >= 2), and one row gets its own entry. Requests never compile.
	s.predict(tensor.MarkDynamic(s.input(make([]float32, 2*cfg.In), 2), 0)).Float32s()
	s.predict(s.input(make([]float32, cfg.In), 1)).Float32s()
	return s
}

// input makes a [rows, In] tensor on the server's device.
func (s *server) input(flat []float32, rows int) *tensor.Tensor {
	return tensor.FromSlice(flat, rows, s.cfg.In).ToDevice(s.cfg.Device)
}

// Done is closed once Requests /v1/predict requests have been answered.
func (s *server) Done() <-chan struct{} { return s.done }

// handler routes the endpoints; any panic becomes a logged 500.
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/predict", s.handlePredict)
	mux.HandleFunc("/metrics", s.handleMetrics)
	mux.HandleFunc("/healthz", s.handleHealthz)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s: use POST /v1/predict, GET /metrics or GET /healthz", r.URL.Path))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.cfg.Logger.Printf("panic serving %s %s: %v\n%s", r.Method, r.URL.Path, p, debug.Stack())
				writeError(w, http.StatusInternalServerError, "internal server error (logged)")
			}
		}()
		mux.ServeHTTP(w, r)
	})
}

// httpServer is the http.Server main and the tests use.
func (s *server) httpServer() *http.Server {
	return &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          s.cfg.Logger,
	}
}

type errorResponse struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		status = http.StatusInternalServerError
		b.Reset()
		json.NewEncoder(&b).Encode(errorResponse{"encoding the response: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorResponse{msg})
}

func (s *server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed: use GET /healthz")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ok\n")
}

// value is one input number. Besides JSON numbers it accepts the strings
// "NaN", "Infinity", "-Infinity" (and "Inf", "-Inf"), which JSON cannot
// spell as numbers, so that such inputs are refused with 422 rather than a
// syntax error; numbers beyond float32's range read as ±Inf and are refused
// the same way.
type value float32

func (v *value) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		s, err := strconv.Unquote(string(b))
		if err != nil {
			return fmt.Errorf("input value %s is not a number", clip(b, 40))
		}
		switch strings.ToLower(s) {
		case "nan":
			*v = value(math.NaN())
		case "inf", "+inf", "infinity", "+infinity":
			*v = value(math.Inf(1))
		case "-inf", "-infinity":
			*v = value(math.Inf(-1))
		default:
			return fmt.Errorf("input value %s is not a number", clip(b, 40))
		}
		return nil
	}
	if string(b) == "null" {
		return errors.New("input value null is not a number")
	}
	f, err := strconv.ParseFloat(string(b), 32)
	if err != nil && !errors.Is(err, strconv.ErrRange) { // out of range: ±Inf, refused below
		return fmt.Errorf("input value %s is not a number", clip(b, 40))
	}
	*v = value(f)
	return nil
}

// clip makes text from the request fit in a one-line error message of
// reasonable length: the body may hold a megabyte in one value, and a
// nested array's raw text may hold line breaks.
func clip[T []byte | string](text T, n int) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, string(text))
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

type predictRequest struct {
	Inputs [][]value `json:"inputs"`
}

type predictResponse struct {
	Outputs   [][]float32 `json:"outputs"`
	Batch     int         `json:"batch"`
	LatencyUS int64       `json:"latency_us"`
}

// requestError is a request the server refuses: the status to answer with
// and a one-line reason.
type requestError struct {
	status int
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func refuse(status int, format string, args ...any) *requestError {
	return &requestError{status, fmt.Sprintf(format, args...)}
}

// decodeRequest reads a /v1/predict body, which the caller limits with
// http.MaxBytesReader, and returns its rows of in values, flattened. The
// body must hold 1 to maxRows rows of in finite numbers; anything else is
// a *requestError with a 4xx status.
func decodeRequest(body io.Reader, in, maxRows int) (flat []float32, rows int, err error) {
	usage := fmt.Sprintf(`want {"inputs": [[%d numbers], ...]}`, in)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	var req predictRequest
	err = dec.Decode(&req)
	if err == nil {
		if err = dec.Decode(&struct{}{}); err == io.EOF {
			err = nil
		} else if !isTooBig(err) {
			err = errors.New("unexpected data after the JSON object")
		}
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &tooBig):
			return nil, 0, refuse(http.StatusRequestEntityTooLarge, "request body too large: the limit is %d bytes", tooBig.Limit)
		case errors.As(err, &typ):
			return nil, 0, refuse(http.StatusBadRequest, "invalid JSON: unexpected %s at offset %d (%s)", clip(typ.Value, 40), typ.Offset, usage)
		}
		return nil, 0, refuse(http.StatusBadRequest, "invalid JSON: %s (%s)", clip(err.Error(), 200), usage)
	}
	n := len(req.Inputs)
	switch {
	case req.Inputs == nil:
		return nil, 0, refuse(http.StatusBadRequest, `missing "inputs": %s`, usage)
	case n == 0:
		return nil, 0, refuse(http.StatusBadRequest, `"inputs" is empty: send 1 to %d rows`, maxRows)
	case n > maxRows:
		return nil, 0, refuse(http.StatusRequestEntityTooLarge, "too many rows: %d, at most %d per request (split the batch)", n, maxRows)
	}
	flat = make([]float32, 0, n*in)
	for i, row := range req.Inputs {
		if len(row) != in {
			return nil, 0, refuse(http.StatusUnprocessableEntity, "row %d has %d values, expected length %d (the model's input size)", i, len(row), in)
		}
		for j, v := range row {
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, 0, refuse(http.StatusUnprocessableEntity, "inputs[%d][%d] is %v: values must be finite float32 numbers", i, j, f)
			}
			flat = append(flat, float32(v))
		}
	}
	return flat, n, nil
}

func isTooBig(err error) bool {
	var tooBig *http.MaxBytesError
	return errors.As(err, &tooBig)
}

// countingWriter records its /v1/predict request when the status is
// written, before any of the response can reach the client: a client
// that has read its answer finds the request counted in /metrics.
type countingWriter struct {
	http.ResponseWriter
	s        *server
	start    time.Time
	recorded bool
}

func (cw *countingWriter) WriteHeader(status int) {
	if !cw.recorded {
		cw.recorded = true
		cw.s.record(status, time.Since(cw.start))
	}
	cw.ResponseWriter.WriteHeader(status)
}

func (cw *countingWriter) Write(b []byte) (int, error) {
	if !cw.recorded {
		cw.WriteHeader(http.StatusOK)
	}
	return cw.ResponseWriter.Write(b)
}

func (s *server) handlePredict(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	// The limit gets w itself, not the wrapper: through it, net/http
	// closes the connection after a body over the limit, unread.
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	cw := &countingWriter{ResponseWriter: w, s: s, start: start}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.cfg.Logger.Printf("panic serving %s %s: %v\n%s", r.Method, r.URL.Path, p, debug.Stack())
			writeError(cw, http.StatusInternalServerError, "internal server error (logged)")
		}
		if !cw.recorded { // nothing written: net/http answers 200
			cw.WriteHeader(http.StatusOK)
		}
	}()
	s.servePredict(cw, r, body, start)
}

// servePredict answers one prediction.
func (s *server) servePredict(w http.ResponseWriter, r *http.Request, body io.Reader, start time.Time) {
	fail := func(status int, format string, args ...any) {
		writeError(w, status, fmt.Sprintf(format, args...))
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		fail(http.StatusMethodNotAllowed, "method %s not allowed: use POST /v1/predict", r.Method)
		return
	}
	if r.ContentLength > s.cfg.MaxBodyBytes { // declared too large: refuse unread
		fail(http.StatusRequestEntityTooLarge, "request body too large: %d bytes declared, the limit is %d bytes", r.ContentLength, s.cfg.MaxBodyBytes)
		return
	}
	flat, n, err := decodeRequest(body, s.cfg.In, s.cfg.MaxRows)
	if err != nil {
		var re *requestError
		if !errors.As(err, &re) {
			re = &requestError{http.StatusBadRequest, err.Error()}
		}
		fail(re.status, "%s", re.msg)
		return
	}

	var out []float32
	if err := tensor.Try(func() { out = s.predict(s.input(flat, n)).Float32s() }); err != nil {
		s.cfg.Logger.Printf("model error: %v", err)
		var te *tensor.Error
		if errors.As(err, &te) && te.Op == "alloc" { // device out of memory: transient
			fail(http.StatusServiceUnavailable, "model: %v", err)
			return
		}
		fail(http.StatusInternalServerError, "model: %v", err)
		return
	}
	if len(out) != n*s.cfg.Out {
		fail(http.StatusInternalServerError, "model returned %d values for %d rows of %d", len(out), n, s.cfg.Out)
		return
	}
	for k, v := range out {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			fail(http.StatusUnprocessableEntity, "output %d of row %d is %v: the inputs are too large", k%s.cfg.Out, k/s.cfg.Out, v)
			return
		}
	}
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = out[i*s.cfg.Out : (i+1)*s.cfg.Out : (i+1)*s.cfg.Out]
	}
	writeJSON(w, http.StatusOK, predictResponse{Outputs: rows, Batch: n, LatencyUS: time.Since(start).Microseconds()})
}

// record counts an answered /v1/predict request and keeps its latency if it
// succeeded.
func (s *server) record(status int, d time.Duration) {
	s.mu.Lock()
	s.byStatus[status]++
	if status == http.StatusOK {
		s.lat[s.latNext] = d
		s.latNext++
		if s.latNext == len(s.lat) {
			s.latNext, s.latFull = 0, true
		}
	}
	s.mu.Unlock()
	if n := s.answered.Add(1); s.cfg.Requests > 0 && n >= s.cfg.Requests {
		s.doneOnce.Do(func() { close(s.done) })
	}
}

// metrics is what GET /metrics returns.
type metrics struct {
	UptimeSeconds     float64          `json:"uptime_s"`
	Requests          int64            `json:"requests"` // /v1/predict requests answered
	ByStatus          map[string]int64 `json:"by_status"`
	RequestsPerSecond float64          `json:"requests_per_second"` // since start
	Latency           latencyStats     `json:"latency_us"`
	Compile           compileStats     `json:"compile"`
	Device            string           `json:"device"`
	Memory            any              `json:"memory"` // "cpu", or the GPU allocator's statistics
	Model             modelInfo        `json:"model"`
}

type latencyStats struct {
	Window int     `json:"window"` // successful predictions the percentiles cover
	P50    float64 `json:"p50"`
	P90    float64 `json:"p90"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
}

type compileStats struct {
	Calls      int64 `json:"calls"`
	Compiles   int64 `json:"compiles"`
	Recompiles int64 `json:"recompiles"`
	Breaks     int64 `json:"breaks"`
	EagerCalls int64 `json:"eager_calls"`
}

type modelInfo struct {
	In     int `json:"in"`
	Hidden int `json:"hidden"`
	Out    int `json:"out"`
	Layers int `json:"layers"`
}

func (s *server) metrics() metrics {
	s.mu.Lock()
	n := s.latNext
	if s.latFull {
		n = len(s.lat)
	}
	window := slices.Clone(s.lat[:n])
	byStatus := make(map[string]int64, len(s.byStatus))
	var total int64
	for code, c := range s.byStatus {
		byStatus[strconv.Itoa(code)] = c
		total += c
	}
	s.mu.Unlock()

	up := time.Since(s.start).Seconds()
	m := metrics{
		UptimeSeconds:     up,
		Requests:          total,
		ByStatus:          byStatus,
		RequestsPerSecond: float64(total) / up,
		Latency:           percentiles(window),
		Compile: compileStats{
			Calls:      s.stats.Calls.Load(),
			Compiles:   s.stats.Compiles.Load(),
			Recompiles: s.stats.Recompiles.Load(),
			Breaks:     s.stats.Breaks.Load(),
			EagerCalls: s.stats.EagerCalls.Load(),
		},
		Device: s.cfg.Device.String(),
		Memory: "cpu",
		Model:  modelInfo{In: s.cfg.In, Hidden: s.cfg.Hidden, Out: s.cfg.Out, Layers: s.cfg.Layers},
	}
	if s.cfg.Device != tensor.CPU {
		m.Memory = tensor.MemoryStats(s.cfg.Device)
	}
	return m
}

// percentiles sorts d and reads nearest-rank percentiles, in microseconds.
func percentiles(d []time.Duration) latencyStats {
	st := latencyStats{Window: len(d)}
	if len(d) == 0 {
		return st
	}
	slices.Sort(d)
	us := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(len(d)))) - 1
		return float64(d[max(i, 0)]) / 1e3
	}
	st.P50, st.P90, st.P99, st.Max = us(50), us(90), us(99), us(100)
	return st
}

func (s *server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed: use GET /metrics")
		return
	}
	writeJSON(w, http.StatusOK, s.metrics())
}

// ---- the load driver: -selftest, and the load test ----

// loadConfig describes a load run against a running server.
type loadConfig struct {
	URL      string // base URL, e.g. http://127.0.0.1:8080
	Requests int
	Clients  int
	MaxBatch int    // batch sizes are 1..MaxBatch, pseudo-random from Seed
	Seed     uint64 // for the batch sizes and the input values
	In       int
	// Want, if set, computes the expected outputs of inputs [rows][In]; every
	// response is compared with them exactly (float32 bits).
	Want func(inputs [][]float32) [][]float32
}

type loadResult struct {
	Requests  int
	Errors    int
	FirstErr  error
	Elapsed   time.Duration
	Latencies []time.Duration // client-observed, sorted
}

func (r loadResult) percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(r.Latencies)))) - 1
	return r.Latencies[max(i, 0)]
}

func (r loadResult) rps() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

func (r loadResult) String() string {
	return fmt.Sprintf("requests %d, errors %d, p50 %v, p99 %v, %.0f req/s (%v)",
		r.Requests, r.Errors, r.percentile(50).Round(time.Microsecond), r.percentile(99).Round(time.Microsecond),
		r.rps(), r.Elapsed.Round(time.Millisecond))
}

// loadBodies makes one request body per batch size 1..maxBatch (the rows of
// size b are the first b rows of one pseudo-random matrix) and the inputs.
func loadBodies(seed uint64, maxBatch, in int) (bodies [][]byte, inputs [][][]float32) {
	rng := rand.New(rand.NewPCG(seed, 1))
	all := make([][]float32, maxBatch)
	for i := range all {
		all[i] = make([]float32, in)
		for j := range all[i] {
			all[i][j] = float32(rng.NormFloat64())
		}
	}
	bodies = make([][]byte, maxBatch+1)
	inputs = make([][][]float32, maxBatch+1)
	for b := 1; b <= maxBatch; b++ {
		inputs[b] = all[:b]
		body, err := json.Marshal(map[string]any{"inputs": all[:b]})
		if err != nil {
			panic(err)
		}
		bodies[b] = body
	}
	return bodies, inputs
}

// runLoad sends lc.Requests predictions from lc.Clients goroutines through
// client and checks every answer.
func runLoad(ctx context.Context, client *http.Client, lc loadConfig) loadResult {
	bodies, inputs := loadBodies(lc.Seed, lc.MaxBatch, lc.In)
	var want [][][]float32
	if lc.Want != nil {
		want = make([][][]float32, len(inputs))
		for b := 1; b < len(inputs); b++ {
			want[b] = lc.Want(inputs[b])
		}
	}
	rng := rand.New(rand.NewPCG(lc.Seed, 2))
	batches := make([]int, lc.Requests)
	for i := range batches {
		batches[i] = 1 + rng.IntN(lc.MaxBatch)
	}

	var (
		next     atomic.Int64
		mu       sync.Mutex
		res      loadResult
		wg       sync.WaitGroup
		perCli   = make([][]time.Duration, lc.Clients)
		errCount atomic.Int64
	)
	url := strings.TrimSuffix(lc.URL, "/") + "/v1/predict"
	start := time.Now()
	for c := range lc.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= lc.Requests || ctx.Err() != nil {
					return
				}
				b := batches[i]
				t0 := time.Now()
				err := predictOnce(ctx, client, url, bodies[b], b, want, lc.In)
				perCli[c] = append(perCli[c], time.Since(t0))
				if err != nil {
					errCount.Add(1)
					mu.Lock()
					if res.FirstErr == nil {
						res.FirstErr = fmt.Errorf("request %d (batch %d): %w", i, b, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	for _, l := range perCli {
		res.Latencies = append(res.Latencies, l...)
	}
	slices.Sort(res.Latencies)
	res.Requests = len(res.Latencies)
	res.Errors = int(errCount.Load())
	return res
}

func predictOnce(ctx context.Context, client *http.Client, url string, body []byte, batch int, want [][][]float32, in int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(data))
	}
	var pr predictResponse
	if err := json.Unmarshal(data, &pr); err != nil {
		return fmt.Errorf("decoding the response: %w", err)
	}
	if pr.Batch != batch || len(pr.Outputs) != batch {
		return fmt.Errorf("sent %d rows, got batch %d with %d outputs", batch, pr.Batch, len(pr.Outputs))
	}
	if want != nil {
		for i, row := range pr.Outputs {
			if !near(row, want[batch][i]) {
				return fmt.Errorf("row %d: got %v, want %v", i, row, want[batch][i])
			}
		}
	}
	return nil
}

// newLoadClient returns a client that keeps a connection per load client.
func newLoadClient(clients int) *http.Client {
	return &http.Client{
		Timeout: 60 * time.Second,
		Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConns:        2 * clients,
			MaxIdleConnsPerHost: 2 * clients,
			IdleConnTimeout:     30 * time.Second,
		},
	}
}

// reference runs the plain (uncompiled) model on rows of inputs.
func (s *server) reference(inputs [][]float32) [][]float32 {
	flat := make([]float32, 0, len(inputs)*s.cfg.In)
	for _, r := range inputs {
		flat = append(flat, r...)
	}
	out := s.model.forward(s.input(flat, len(inputs))).Float32s()
	rows := make([][]float32, len(inputs))
	for i := range rows {
		rows[i] = out[i*s.cfg.Out : (i+1)*s.cfg.Out]
	}
	return rows
}

// ---- main ----

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	defDevice := "cpu"
	if d := os.Getenv("GOCOMPILE_DEVICE"); d != "" {
		defDevice = d
	}
	var (
		addr     = flag.String("addr", "127.0.0.1:8080", "listen address (with -selftest: 127.0.0.1:0 unless given)")
		device   = flag.String("device", defDevice, "cpu, cuda or cuda:N (default: GOCOMPILE_DEVICE, else cpu)")
		requests = flag.Int("requests", 0, "answer this many /v1/predict requests, then shut down and exit; 0: run until SIGINT/SIGTERM")
		in       = flag.Int("in", 64, "input features")
		hidden   = flag.Int("hidden", 256, "hidden layer width")
		out      = flag.Int("out", 16, "outputs")
		layers   = flag.Int("layers", 4, "Linear layers (GELU between them)")
		seed     = flag.Uint64("seed", 1, "weight seed")
		maxRows  = flag.Int("max-rows", 256, "rows per request")
		selftest = flag.Bool("selftest", false, "start the server, send -requests predictions from -clients goroutines, print a summary and exit")
		clients  = flag.Int("clients", 64, "-selftest: concurrent clients")
		maxBatch = flag.Int("max-batch", 64, "-selftest: batch sizes are pseudo-random in 1..max-batch")
		grace    = flag.Duration("shutdown-timeout", 10*time.Second, "how long shutdown waits for in-flight requests")
		mode     = flag.String("mode", "default", "compilation mode: default, reduce-overhead (CUDA graphs on a GPU) or max-autotune")
	)
	flag.Parse()
	addrSet := false
	flag.Visit(func(f *flag.Flag) { addrSet = addrSet || f.Name == "addr" })
	if *selftest {
		if *requests <= 0 {
			*requests = 10000
		}
		if !addrSet {
			*addr = "127.0.0.1:0"
		}
	}

	dev, err := tensor.ParseDevice(*device)
	if err != nil {
		log.Fatalf("-device: %v", err)
	}
	modes := map[string]tensor.Mode{"default": tensor.Default, "reduce-overhead": tensor.ReduceOverhead, "max-autotune": tensor.MaxAutotune}
	compileMode, ok := modes[*mode]
	if !ok {
		log.Fatalf("-mode %q: want default, reduce-overhead or max-autotune", *mode)
	}
	var s *server
	buildStart := time.Now()
	if err := tensor.Try(func() {
		if dev != tensor.CPU {
			tensor.SetDefaultDevice(dev)
		}
		s = newServer(config{Device: dev, In: *in, Hidden: *hidden, Out: *out, Layers: *layers, Seed: *seed,
			Mode: compileMode, MaxRows: *maxRows, Requests: int64(*requests)})
	}); err != nil {
		log.Fatalf("starting the model: %v", err)
	}
	log.Printf("model %d → %d×%d → %d (%d layers) on %v compiled and warmed up in %v",
		*in, *layers-1, *hidden, *out, *layers, dev, time.Since(buildStart).Round(time.Millisecond))

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	log.Printf("listening on %s (POST /v1/predict, GET /metrics, GET /healthz)", base)
	srv := s.httpServer()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var loadDone chan loadResult
	if *selftest {
		loadDone = make(chan loadResult, 1)
		go func() {
			client := newLoadClient(*clients)
			defer client.CloseIdleConnections()
			loadDone <- runLoad(ctx, client, loadConfig{URL: base, Requests: *requests, Clients: *clients,
				MaxBatch: min(*maxBatch, *maxRows), Seed: 7, In: *in, Want: s.reference})
		}()
	}

	var load *loadResult
	select {
	case <-ctx.Done():
		log.Printf("signal received; shutting down")
	case <-s.Done():
		log.Printf("answered %d requests; shutting down", *requests)
	case r := <-loadDone: // only if some requests never reached the server
		load = &r
		log.Printf("selftest finished early; shutting down")
	case err := <-serveErr:
		log.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Printf("shutdown: %v", err)
	}
	m := s.metrics()
	log.Printf("served %d requests (%v), server p50 %.0fµs p99 %.0fµs, compiles %d (recompiles %d)",
		m.Requests, m.ByStatus, m.Latency.P50, m.Latency.P99, m.Compile.Compiles, m.Compile.Recompiles)
	if loadDone != nil {
		if load == nil {
			r := <-loadDone
			load = &r
		}
		r := *load
		fmt.Printf("selftest: %v, %d clients, batch 1-%d, compiles %d\n", r, *clients, min(*maxBatch, *maxRows), m.Compile.Compiles)
		if r.Errors > 0 {
			log.Printf("first error: %v", r.FirstErr)
			os.Exit(1)
		}
	}
}

// near reports whether a compiled output row matches the plain model's:
// fused kernels may round differently by a few ulps, so values agree to
// 1e-5 relative to |want|+1.
func near(got, want []float32) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range want {
		if d := math.Abs(float64(got[i]) - float64(want[i])); !(d <= 1e-5*(math.Abs(float64(want[i]))+1)) {
			return false
		}
	}
	return true
}
