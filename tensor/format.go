package tensor

import (
	"math"
	"strconv"
	"strings"

	"gocompile/ir"
)

// Printing follows PyTorch's torch/_tensor_str.py under its default print
// options, so that a tensor reads as repr(torch.tensor(...)) would, except
// that dtypes are named as in this package ("int32", not "torch.int32").
const (
	printPrecision = 4
	printThreshold = 1000 // more elements than this are summarised
	printEdgeItems = 3    // shown at each end of a summarised dim
	printLineWidth = 80
)

// String returns t as PyTorch prints it, e.g. "tensor([1., 2.])". Tensors
// of more than 1000 elements are summarised with "...".
func (t *Tensor) String() string {
	t.must("String")
	if t.px != nil {
		return t.materialize("String").String()
	}
	const prefix = "tensor("
	indent := len(prefix)
	var suffixes []string
	if t.v.Device().Type != DeviceCPU {
		suffixes = append(suffixes, "device='"+t.v.Device().String()+"'")
	}
	var body string
	if t.Numel() == 0 {
		body = "[]"
		if len(t.shape()) != 1 {
			suffixes = append(suffixes, "size="+pyTuple(t.shape()))
		}
		// With no values to hint at the type, PyTorch names every type but
		// the default float, int64 and bool included.
		if t.dtype() != ir.DefaultFloat {
			suffixes = append(suffixes, "dtype="+t.dtype().String())
		}
	} else {
		if t.dtype() != ir.DefaultFloat && t.dtype() != Int64 && t.dtype() != Bool {
			suffixes = append(suffixes, "dtype="+t.dtype().String())
		}
		p := &printer{t: t.cpu(), summarize: t.Numel() > printThreshold}
		p.fmt = p.newFormatter()
		body = p.str(0, p.t.v.Offset(), indent)
	}
	return addSuffixes(prefix+body, suffixes, indent)
}

// addSuffixes appends ", suffix" for each suffix, starting a new line when
// the current one would pass the line width. The length of the last line is
// over-counted by 2 because PyTorch's _add_suffixes does so.
func addSuffixes(s string, suffixes []string, indent int) string {
	var b strings.Builder
	b.WriteString(s)
	last := len(s) - strings.LastIndexByte(s, '\n') + 1
	for _, suf := range suffixes {
		if last+len(suf)+2 > printLineWidth {
			b.WriteString(",\n" + strings.Repeat(" ", indent) + suf)
			last = indent + len(suf)
		} else {
			b.WriteString(", " + suf)
			last += len(suf) + 2
		}
	}
	b.WriteByte(')')
	return b.String()
}

// pyTuple writes a shape as Python writes a tuple: "(0, 3)", "(0,)".
func pyTuple(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.Itoa(d)
	}
	if len(parts) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// printer walks t's layout directly (shape, strides, offset into storage),
// so views print without being copied.
type printer struct {
	t         *Tensor
	summarize bool
	fmt       formatter
}

// shown lists the indices of dim d to print; -1 marks the "..." gap.
func (p *printer) shown(d int) []int {
	n := p.t.shape()[d]
	if p.summarize && n > 2*printEdgeItems {
		idx := make([]int, 0, 2*printEdgeItems+1)
		for i := range printEdgeItems {
			idx = append(idx, i)
		}
		idx = append(idx, -1)
		for i := n - printEdgeItems; i < n; i++ {
			idx = append(idx, i)
		}
		return idx
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// visit calls fn with the storage offset of every shown element.
func (p *printer) visit(d, off int, fn func(off int)) {
	if d == len(p.t.shape()) {
		fn(off)
		return
	}
	for _, i := range p.shown(d) {
		if i >= 0 {
			p.visit(d+1, off+i*p.t.strides()[d], fn)
		}
	}
}

// str formats the sub-tensor of dims d… starting at storage offset off,
// whose opening bracket sits in column indent.
func (p *printer) str(d, off, indent int) string {
	rank := len(p.t.shape())
	switch d {
	case rank:
		return p.fmt.format(p.t, off)
	case rank - 1:
		return p.vector(off, indent)
	}
	var parts []string
	for _, i := range p.shown(d) {
		if i < 0 {
			parts = append(parts, "...")
			continue
		}
		parts = append(parts, p.str(d+1, off+i*p.t.strides()[d], indent+1))
	}
	// One line break per remaining dim: blank lines between 2-D blocks.
	sep := "," + strings.Repeat("\n", rank-d-1) + strings.Repeat(" ", indent+1)
	return "[" + strings.Join(parts, sep) + "]"
}

// vector formats the last dim, wrapping to fit the line width; the gap
// counts as one element when wrapping, as in PyTorch.
func (p *printer) vector(off, indent int) string {
	d := len(p.t.shape()) - 1
	perLine := max(1, (printLineWidth-indent)/(p.fmt.width+2))
	var elems []string
	for _, i := range p.shown(d) {
		if i < 0 {
			elems = append(elems, " ...")
			continue
		}
		elems = append(elems, p.fmt.format(p.t, off+i*p.t.strides()[d]))
	}
	var lines []string
	for i := 0; i < len(elems); i += perLine {
		lines = append(lines, strings.Join(elems[i:min(i+perLine, len(elems))], ", "))
	}
	return "[" + strings.Join(lines, ",\n"+strings.Repeat(" ", indent+1)) + "]"
}

// formatter holds the choices made once for the whole tensor (as PyTorch's
// _Formatter): every element is right-aligned to width.
type formatter struct {
	intMode bool // every finite value is integral: print "2." not "2.0000"
	sciMode bool
	width   int
}

// newFormatter decides the format from the shown elements only, so a
// summarised tensor is formatted by what is printed.
func (p *printer) newFormatter() formatter {
	t := p.t
	f := formatter{intMode: true, width: 1}
	if !t.dtype().IsFloat() {
		p.visit(0, t.v.Offset(), func(off int) {
			f.width = max(f.width, len(f.raw(t, off)))
		})
		return f
	}
	// Only non-zero finite values count, for the mode and for the width.
	var vals []float64
	lo, hi := math.Inf(1), 0.0
	p.visit(0, t.v.Offset(), func(off int) {
		v := t.floatAt(off)
		if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		vals = append(vals, v)
		lo, hi = min(lo, math.Abs(v)), max(hi, math.Abs(v))
		if v != math.Ceil(v) {
			f.intMode = false
		}
	})
	if len(vals) == 0 {
		return f
	}
	f.sciMode = hi/lo > 1000 || hi > 1e8 || (!f.intMode && lo < 1e-4)
	for _, v := range vals {
		f.width = max(f.width, len(f.formatFloat(v)))
	}
	return f
}

// format returns the element at storage offset off, padded to the width.
// Non-finite values may be wider than the width: PyTorch leaves them so.
func (f formatter) format(t *Tensor, off int) string {
	s := f.raw(t, off)
	return strings.Repeat(" ", max(0, f.width-len(s))) + s
}

func (f formatter) raw(t *Tensor, off int) string {
	switch d := t.v.HostData().(type) {
	case []int32:
		return strconv.FormatInt(int64(d[off]), 10)
	case []int64:
		return strconv.FormatInt(d[off], 10)
	case []bool:
		if d[off] {
			return "True"
		}
		return "False"
	}
	return f.formatFloat(t.floatAt(off))
}

func (f formatter) formatFloat(v float64) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case f.sciMode:
		return strconv.FormatFloat(v, 'e', printPrecision, 64)
	case f.intMode:
		return strconv.FormatFloat(v, 'f', 0, 64) + "."
	}
	return strconv.FormatFloat(v, 'f', printPrecision, 64)
}

// floatAt reads the floating element at storage offset off exactly (float16
// and bfloat16 widen without rounding).
func (t *Tensor) floatAt(off int) float64 {
	switch d := t.v.HostData().(type) {
	case []float32:
		return float64(d[off])
	case []float64:
		return d[off]
	case []uint16:
		if t.dtype() == BFloat16 {
			return float64(ir.BF16ToF32(d[off]))
		}
		return float64(ir.F16ToF32(d[off]))
	}
	return t.v.At(off)
}
