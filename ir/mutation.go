package ir

// The functional forms of in-place writes. Compile records a write into a
// view of a tensor (dst.Narrow(…).Copy(src)) as a new version of the
// whole storage, AsStridedScatter of the old one, and reads of the
// storage's tensors after it as AsStrided views of that version; the
// last version is written back when the compiled program has run, as
// torch.compile's functionalization does. Both take the storage as a 1-D
// contiguous tensor: Attrs.Dims holds the view's sizes then its strides
// (in elements) and Attrs.Start its offset in the storage.
var (
	OpAsStrided = view("as_strided", "AsStrided", asStridedRule,
		"the view of a 1-D contiguous storage with sizes Attrs.Dims[:r], strides Attrs.Dims[r:] and offset Attrs.Start")
	OpAsStridedIndexCopy = extern(&Op{Name: "as_strided_index_copy", Title: "AsStridedIndexCopy", Arity: 3, Indices: []int{1},
		Rule: SameAsFirst, Shape: asStridedIndexCopyShape,
		Doc: "a copy of the 1-D storage x whose view AsStrided(Attrs) has src's entries at the 1-D index (operand 1) along " +
			"Attrs.Dim, as IndexCopy of the view; with Attrs.KeepDim set, x itself, written in place"})
	OpAsStridedScatter = extern(&Op{Name: "as_strided_scatter", Title: "AsStridedScatter", Arity: 2, Rule: SameAsFirst,
		Shape: asStridedScatterShape,
		Doc: "a copy of the 1-D storage x with the view AsStrided(Attrs) replaced by src (broadcast, converted to x's type); " +
			"with Attrs.KeepDim set (by Compile, where nothing else reads x) x itself, written in place"})
)

// StridedLayout is the layout Attrs for AsStrided and AsStridedScatter.
func StridedLayout(l Layout) Attrs {
	return Attrs{Dims: append(clone(l.Shape), l.Strides...), Start: l.Offset}
}

// stridedView checks a's layout against a storage of n elements.
func stridedView(title string, n int, a *Attrs) (Layout, error) {
	if len(a.Dims)%2 != 0 {
		return Layout{}, Errorf(title, nil, "pass the sizes then the strides", "%d numbers for sizes and strides", len(a.Dims))
	}
	r := len(a.Dims) / 2
	l := Layout{Shape: clone(a.Dims[:r]), Strides: clone(a.Dims[r:]), Offset: a.Start}
	lo, hi := l.Offset, l.Offset
	empty := false
	for d, s := range l.Shape {
		if s < 0 {
			return Layout{}, Errorf(title, [][]int{l.Shape}, "use sizes of 0 or more", "size %d", s)
		}
		if s == 0 {
			empty = true
		}
		if st := l.Strides[d]; st < 0 {
			lo += (s - 1) * st
		} else {
			hi += (s - 1) * st
		}
	}
	if !empty && (lo < 0 || hi >= n) {
		return Layout{}, Errorf(title, [][]int{l.Shape}, "keep the view inside the storage",
			"elements %d to %d of a storage of %d", lo, hi, n)
	}
	return l, nil
}

func asStridedRule(in Layout, a *Attrs) (Layout, error) {
	if len(in.Shape) != 1 || in.Strides[0] != 1 {
		return Layout{}, Errorf("AsStrided", [][]int{in.Shape}, "pass a storage: a 1-D contiguous tensor",
			"the input has shape %s and strides %v", FormatShape(in.Shape), in.Strides)
	}
	l, err := stridedView("AsStrided", in.Shape[0], a)
	l.Offset += in.Offset
	return l, err
}

func asStridedScatterShape(in [][]int, a *Attrs) ([]int, error) {
	if len(in[0]) != 1 {
		return nil, Errorf("AsStridedScatter", in, "pass a storage: a 1-D tensor", "the storage has %d dims", len(in[0]))
	}
	l, err := stridedView("AsStridedScatter", in[0][0], a)
	if err != nil {
		return nil, err
	}
	if _, err := Broadcast("AsStridedScatter", in[1], l.Shape); err != nil || !sameAfterBroadcast(in[1], l.Shape) {
		return nil, Errorf("AsStridedScatter", in, "the source must broadcast to the view's shape",
			"source %s, view %s", FormatShape(in[1]), FormatShape(l.Shape))
	}
	return clone(in[0]), nil
}

// sameAfterBroadcast reports whether src broadcasts to exactly shape.
func sameAfterBroadcast(src, shape []int) bool {
	b, err := Broadcast("", src, shape)
	return err == nil && SameShape(b, shape)
}

func asStridedIndexCopyShape(in [][]int, a *Attrs) ([]int, error) {
	if len(in[0]) != 1 {
		return nil, Errorf("AsStridedIndexCopy", in, "pass a storage: a 1-D tensor", "the storage has %d dims", len(in[0]))
	}
	l, err := stridedView("AsStridedIndexCopy", in[0][0], a)
	if err != nil {
		return nil, err
	}
	if _, err := indexCopyShape([][]int{l.Shape, in[1], in[2]}, a); err != nil {
		return nil, err
	}
	return clone(in[0]), nil
}
