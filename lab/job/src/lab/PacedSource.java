package lab;

import java.io.Serializable;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource.NumberSequenceSplit;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.metrics.MetricGroup;

import lab.compat.LabParallelSourceFunction;
import lab.compat.LegacyEmitter;

/**
 * A rate-limited FLIP-27 source of generated records that builds on every Flink from 1.15 to
 * 2.x (DataGeneratorSource and RateLimiterStrategy exist only from 1.17/1.18, and in 1.x
 * flink-connector-datagen is not in the distribution). The splits and their enumerator are
 * NumberSequenceSource's; the reader paces itself: while ahead of rate x elapsed time it
 * answers NOTHING_AVAILABLE with a future completed when the next record is due, so the task
 * is idle then (as a Kafka source waiting for data is), and backpressured when its output is
 * full.
 *
 * Like a Kafka source (FLIP-33) it reports "pendingRecords": the backlog of a producer writing
 * at exactly the configured rate, expectedByNow - emitted.
 *
 * {@link Legacy} is the same generator as a legacy SourceFunction (env.addSource): its thread
 * is not the task's mailbox thread, so Flink reports its busy time as NaN.
 */
public class PacedSource implements Source<String, NumberSequenceSplit, Collection<NumberSequenceSplit>>, ResultTypeQueryable<String> {
    private static final long serialVersionUID = 1L;

    /** Makes the records; one instance per reader (subtask). */
    public interface Generator extends Serializable {
        void open(int subtaskIndex);

        String next(long index);

        /** Event time of a record made by next() (the CSV's last field). */
        static long timestampOf(String line) {
            return Long.parseLong(line.substring(line.lastIndexOf(',') + 1));
        }
    }

    private final NumberSequenceSource sequence = new NumberSequenceSource(0, Long.MAX_VALUE - 1);
    private final Generator generator;
    private final double ratePerReader;
    /** > 0: exactly this many splits, whatever the parallelism (FixedSplitsEnumerator); 0: one per reader. */
    private final int fixedSplits;

    /** ratePerReader: records per second of each subtask; 0 = unlimited (and no pendingRecords). */
    public PacedSource(Generator generator, double ratePerReader) {
        this(generator, ratePerReader, 0);
    }

    /** fixedSplits > 0: that many splits for any number of readers; the readers left over get none. */
    public PacedSource(Generator generator, double ratePerReader, int fixedSplits) {
        this.generator = generator;
        this.ratePerReader = ratePerReader;
        this.fixedSplits = fixedSplits;
    }

    @Override
    public Boundedness getBoundedness() {
        return Boundedness.CONTINUOUS_UNBOUNDED;
    }

    @Override
    public SourceReader<String, NumberSequenceSplit> createReader(SourceReaderContext ctx) {
        return new Reader(ctx, generator, ratePerReader);
    }

    @Override
    public SplitEnumerator<NumberSequenceSplit, Collection<NumberSequenceSplit>> createEnumerator(
            SplitEnumeratorContext<NumberSequenceSplit> ctx) throws Exception {
        if (fixedSplits > 0) {
            return new FixedSplitsEnumerator(ctx, FixedSplitsEnumerator.splits(fixedSplits));
        }
        return sequence.createEnumerator(ctx);
    }

    @Override
    public SplitEnumerator<NumberSequenceSplit, Collection<NumberSequenceSplit>> restoreEnumerator(
            SplitEnumeratorContext<NumberSequenceSplit> ctx, Collection<NumberSequenceSplit> checkpoint) throws Exception {
        if (fixedSplits > 0) {
            return new FixedSplitsEnumerator(ctx, checkpoint);
        }
        return sequence.restoreEnumerator(ctx, checkpoint);
    }

    @Override
    public SimpleVersionedSerializer<NumberSequenceSplit> getSplitSerializer() {
        return sequence.getSplitSerializer();
    }

    @Override
    public SimpleVersionedSerializer<Collection<NumberSequenceSplit>> getEnumeratorCheckpointSerializer() {
        return sequence.getEnumeratorCheckpointSerializer();
    }

    @Override
    public TypeInformation<String> getProducedType() {
        return Types.STRING;
    }

    /** Backlog of a producer writing ratePerSecond since startNanos, of which emitted were read. */
    static long pending(long startNanos, double ratePerSecond, long emitted) {
        long expected = (long) ((System.nanoTime() - startNanos) / 1e9 * ratePerSecond);
        return Math.max(0L, expected - emitted);
    }

    static final class Reader implements SourceReader<String, NumberSequenceSplit> {
        private final SourceReaderContext ctx;
        private final Generator generator;
        private final double rate;
        private final ArrayDeque<NumberSequenceSplit> splits = new ArrayDeque<>();
        private NumberSequenceSplit current;
        private long next;
        private boolean noMoreSplits;
        private CompletableFuture<Void> available = CompletableFuture.completedFuture(null);
        private long startNanos;
        private volatile long emitted;

        Reader(SourceReaderContext ctx, Generator generator, double rate) {
            this.ctx = ctx;
            this.generator = generator;
            this.rate = rate;
        }

        @Override
        public void start() {
            generator.open(ctx.getIndexOfSubtask());
            startNanos = System.nanoTime();
            if (rate > 0) {
                ctx.metricGroup().setPendingRecordsGauge(() -> pending(startNanos, rate, emitted));
            }
            ctx.sendSplitRequest();
        }

        @Override
        public InputStatus pollNext(ReaderOutput<String> out) {
            if (current == null || next > current.to()) {
                current = splits.poll();
                if (current == null) {
                    if (noMoreSplits) {
                        return InputStatus.END_OF_INPUT;
                    }
                    available = new CompletableFuture<>();
                    return InputStatus.NOTHING_AVAILABLE;
                }
                next = current.from();
            }
            if (rate > 0) {
                long elapsedNanos = System.nanoTime() - startNanos;
                if (emitted >= elapsedNanos / 1e9 * rate) {
                    long dueNanos = (long) ((emitted + 1) / rate * 1e9);
                    CompletableFuture<Void> f = new CompletableFuture<>();
                    available = f;
                    CompletableFuture.delayedExecutor(Math.max(50_000L, dueNanos - elapsedNanos), TimeUnit.NANOSECONDS)
                            .execute(() -> f.complete(null));
                    return InputStatus.NOTHING_AVAILABLE;
                }
            }
            String line = generator.next(next++);
            out.collect(line, Generator.timestampOf(line));
            emitted++;
            return InputStatus.MORE_AVAILABLE;
        }

        @Override
        public List<NumberSequenceSplit> snapshotState(long checkpointId) {
            List<NumberSequenceSplit> state = new ArrayList<>();
            if (current != null && next <= current.to()) {
                state.add(new NumberSequenceSplit(current.splitId(), next, current.to()));
            }
            state.addAll(splits);
            return state;
        }

        @Override
        public CompletableFuture<Void> isAvailable() {
            return available;
        }

        @Override
        public void addSplits(List<NumberSequenceSplit> added) {
            splits.addAll(added);
            available.complete(null);
        }

        @Override
        public void notifyNoMoreSplits() {
            noMoreSplits = true;
            available.complete(null);
        }

        @Override
        public void close() {}
    }

    /** The same generator and pacing as a legacy SourceFunction (--legacy-source). */
    public static class Legacy extends LabParallelSourceFunction<String> {
        private static final long serialVersionUID = 1L;
        private final Generator generator;
        private final double rate;
        private transient long startNanos;
        private transient volatile long emitted;

        public Legacy(Generator generator, double ratePerReader) {
            this.generator = generator;
            this.rate = ratePerReader;
        }

        @Override
        public void setup(int subtaskIndex, MetricGroup metrics) {
            generator.open(subtaskIndex);
            startNanos = System.nanoTime();
            if (rate > 0) {
                metrics.gauge("pendingRecords", () -> pending(startNanos, rate, emitted));
            }
        }

        @Override
        public void runLoop(LegacyEmitter<String> out) {
            long lastWatermarkMs = 0;
            for (long i = 0; out.running(); i++) {
                if (rate > 0) {
                    long dueNanos = startNanos + (long) (emitted / rate * 1e9);
                    long wait = dueNanos - System.nanoTime();
                    if (wait > 0) {
                        java.util.concurrent.locks.LockSupport.parkNanos(wait);
                    }
                }
                String line = generator.next(i);
                long ts = Generator.timestampOf(line);
                out.collect(line, ts);
                emitted++;
                if (ts - lastWatermarkMs >= 200) {   // bounded out-of-orderness 1 s, like the FLIP-27 path
                    out.watermark(ts - 1000);
                    lastWatermarkMs = ts;
                }
            }
        }
    }
}
