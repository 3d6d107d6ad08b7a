package lab.compat;

import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;

/** Flink 2.x Sink V2: createWriter(WriterInitContext); Sink.InitContext is gone. */
public abstract class LabSink<T> implements Sink<T> {
    @Override
    public final SinkWriter<T> createWriter(WriterInitContext context) {
        return writerFor(context.getTaskInfo().getIndexOfThisSubtask());
    }

    /** The writer of one sink subtask. */
    protected abstract SinkWriter<T> writerFor(int subtaskIndex);
}
