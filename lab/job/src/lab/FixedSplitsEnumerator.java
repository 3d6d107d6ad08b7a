package lab;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

import javax.annotation.Nullable;

import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource.NumberSequenceSplit;

/**
 * A fixed number of splits for any number of readers (idle-split): each reader that asks gets
 * one split while there are any left; a reader that asks after that gets nothing and is never
 * told "no more splits", so it stays alive and silent forever, as a Kafka reader without a
 * partition does (the Kafka connector docs: "Kafka Source does not go automatically in an idle
 * state if the parallelism is higher than the number of partitions").
 */
final class FixedSplitsEnumerator implements SplitEnumerator<NumberSequenceSplit, Collection<NumberSequenceSplit>> {
    private final SplitEnumeratorContext<NumberSequenceSplit> ctx;
    private final ArrayDeque<NumberSequenceSplit> remaining;

    FixedSplitsEnumerator(SplitEnumeratorContext<NumberSequenceSplit> ctx, Collection<NumberSequenceSplit> splits) {
        this.ctx = ctx;
        this.remaining = new ArrayDeque<>(splits);
    }

    /** numSplits disjoint ranges over [0, Long.MAX_VALUE - 1]. */
    static List<NumberSequenceSplit> splits(int numSplits) {
        List<NumberSequenceSplit> out = new ArrayList<>();
        long step = (Long.MAX_VALUE - 1) / numSplits;
        for (int i = 0; i < numSplits; i++) {
            long from = i * step;
            long to = i == numSplits - 1 ? Long.MAX_VALUE - 1 : (i + 1) * step - 1;
            out.add(new NumberSequenceSplit(String.valueOf(i), from, to));
        }
        return out;
    }

    @Override
    public void start() {}

    @Override
    public void handleSplitRequest(int subtaskId, @Nullable String requesterHostname) {
        NumberSequenceSplit s = remaining.poll();
        if (s != null) {
            ctx.assignSplit(s, subtaskId);
            System.out.println("lab.idle-split: split " + s.splitId() + " -> reader " + subtaskId);
        } else {
            System.out.println("lab.idle-split: reader " + subtaskId + " gets no split");
        }
    }

    @Override
    public void addSplitsBack(List<NumberSequenceSplit> splits, int subtaskId) {
        remaining.addAll(splits);
    }

    @Override
    public void addReader(int subtaskId) {}

    @Override
    public Collection<NumberSequenceSplit> snapshotState(long checkpointId) {
        return new ArrayList<>(remaining);
    }

    @Override
    public void close() {}
}
