package lab.compat;

import org.apache.flink.metrics.MetricGroup;

/** What a legacy SourceFunction's loop may do, the same in every Flink version. */
public interface LegacyEmitter<T> {
    void collect(T record, long timestampMs);

    void watermark(long timestampMs);

    boolean running();

    /** A legacy source written once for every version (LabParallelSourceFunction adapts it). */
    interface Source<T> {
        /** open(): the subtask index and the operator's metric group. */
        void setup(int subtaskIndex, MetricGroup metrics) throws Exception;

        /** run(): emit until !emitter.running(). */
        void runLoop(LegacyEmitter<T> emitter) throws Exception;
    }
}
