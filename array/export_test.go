package array

// Launch-shape knobs, for the tuning sweep (TestGPUTuneLaunch).

func PointwiseLaunch() (block, unroll, blocksPerSM int) {
	return pointwiseBlock, pointwiseUnroll, pointwiseBlocksPerSM
}

func SetPointwiseLaunch(block, unroll, blocksPerSM int) {
	pointwiseBlock, pointwiseUnroll, pointwiseBlocksPerSM = block, unroll, blocksPerSM
}

func ReduceLaunch() (unroll, waves, warpRowsLong int) {
	return reduceUnroll, reduceWaves, reduceWarpRowsLong
}

func SetReduceLaunch(unroll, waves, warpRowsLong int) {
	reduceUnroll, reduceWaves, reduceWarpRowsLong = unroll, waves, warpRowsLong
}

func SetReduceUnroll(u int)       { reduceUnroll = u }
func SetReduceWaves(w int)        { reduceWaves = w }
func SetReduceWarpRowsLong(l int) { reduceWarpRowsLong = l }

func Residency(f func(fn, n any) bool) { residency.Range(f) }
