# One device run: GPU tests, benchmarks before (main HEAD + the benchmark
# file) and after (branch rows), PyTorch eager and torch.compile.
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64
cd "$(dirname "$0")"
nvidia-smi -L > $OUT/device.txt
timeout 80 ./program.test -test.run GPU -test.v > $OUT/tests_full.log 2>&1
grep -v "^=== RUN" $OUT/tests_full.log | grep -v WARN | tail -40 > $OUT/tests.log
grep -c WARN $OUT/tests_full.log >> $OUT/tests.log
rm $OUT/tests_full.log
./program_before.test -test.run XXX -test.bench GPU -test.benchtime 200ms > $OUT/bench_before.log 2>&1
./program.test -test.run XXX -test.bench GPU -test.benchtime 200ms > $OUT/bench_after.log 2>&1
timeout 70 python3 torch_rows.py > $OUT/torch.log 2>&1
cd ../../tensor && GOCOMPILE_DEVICE=cuda timeout 80 ../.gpu/rows/tensor.test -test.run 'Compile|Inductor|GPU|Softmax|Norm|Eager|Row' > $OUT/tensor_full.log 2>&1
grep -v WARN $OUT/tensor_full.log | tail -40 > $OUT/tensor.log; rm $OUT/tensor_full.log
cat $OUT/tests.log $OUT/bench_before.log $OUT/bench_after.log $OUT/torch.log $OUT/tensor.log
