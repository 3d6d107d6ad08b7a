package lab.compat;

import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;

/**
 * Flink 1.x Sink V2 (1.15+): createWriter(Sink.InitContext) is the abstract method, also in
 * 1.19/1.20 where createWriter(WriterInitContext) is only a default that calls it.
 */
public abstract class LabSink<T> implements Sink<T> {
    @Override
    public final SinkWriter<T> createWriter(InitContext context) {
        return writerFor(context.getSubtaskId());
    }

    /** The writer of one sink subtask. */
    protected abstract SinkWriter<T> writerFor(int subtaskIndex);
}
