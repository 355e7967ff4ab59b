package main

import "gocompile/tensor"

// The corpus is synthetic text: sentences drawn from small word lists by
// a linear congruential generator, so every run (and the PyTorch script,
// which reads the corpus from the weights file) sees the same bytes.
var (
	subjects = []string{"the cat", "a dog", "the bird", "my friend", "the old man", "a child"}
	verbs    = []string{"sees", "likes", "finds", "chases", "draws", "hears"}
	objects  = []string{"the ball", "a tree", "the moon", "a red box", "the river", "some bread"}
)

// alphabet is the corpus's characters; a token is an index into it.
const alphabet = " .abcdefghijklmnopqrstuvwxyz"

// Corpus returns n tokens of the synthetic text.
func Corpus(n int) []int64 {
	index := map[byte]int64{}
	for i := range len(alphabet) {
		index[alphabet[i]] = int64(i)
	}
	state := uint64(12345)
	next := func(k int) int {
		state = state*6364136223846793005 + 1442695040888963407
		return int(state>>33) % k
	}
	out := make([]int64, 0, n)
	for len(out) < n {
		s := subjects[next(len(subjects))] + " " + verbs[next(len(verbs))] + " " + objects[next(len(objects))] + ". "
		for i := range len(s) {
			out = append(out, index[s[i]])
		}
	}
	return out[:n]
}

// Batch returns step's inputs and targets [B, T] from corpus: window b
// of the batch starts at ((step·B + b)·7919) mod (len − T − 1), and the
// targets are the inputs shifted by one token.
func Batch(corpus []int64, c Config, step int) (inputs, targets *tensor.Tensor) {
	in := make([]int64, 0, c.Batch*c.Seq)
	tg := make([]int64, 0, c.Batch*c.Seq)
	for b := range c.Batch {
		at := ((step*c.Batch + b) * 7919) % (len(corpus) - c.Seq - 1)
		in = append(in, corpus[at:at+c.Seq]...)
		tg = append(tg, corpus[at+1:at+c.Seq+1]...)
	}
	return tensor.FromSlice(in, c.Batch, c.Seq), tensor.FromSlice(tg, c.Batch, c.Seq)
}
