package lab.compat;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.functions.source.RichParallelSourceFunction;
import org.apache.flink.streaming.api.watermark.Watermark;

/** Flink 1.x legacy SourceFunction (org.apache.flink.streaming.api.functions.source). */
public abstract class LabParallelSourceFunction<T> extends RichParallelSourceFunction<T> implements LegacyEmitter.Source<T> {
    private volatile boolean running = true;

    @Override
    public final void open(Configuration parameters) throws Exception {
        setup(getRuntimeContext().getIndexOfThisSubtask(), getRuntimeContext().getMetricGroup());
    }

    @Override
    public final void run(SourceContext<T> ctx) throws Exception {
        runLoop(new LegacyEmitter<T>() {
            @Override
            public void collect(T record, long timestampMs) {
                synchronized (ctx.getCheckpointLock()) {
                    ctx.collectWithTimestamp(record, timestampMs);
                }
            }

            @Override
            public void watermark(long timestampMs) {
                ctx.emitWatermark(new Watermark(timestampMs));
            }

            @Override
            public boolean running() {
                return running;
            }
        });
    }

    @Override
    public final void cancel() {
        running = false;
    }
}
