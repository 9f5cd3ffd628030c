package kip848.harness;

import java.io.FileInputStream;
import java.io.InputStream;
import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A plain Java consumer application: the test harness builds it against the kafka-clients release under test
 * (any release from 3.x on: it calls only the API every one of them has), so an instance that runs an old client
 * library is a real one. Arguments: the topics (comma-separated), then properties files and key=value pairs,
 * merged in order. It polls, commits synchronously after each non-empty batch, and closes (leaving its group)
 * on SIGTERM. The client library logs its own release at start ("Kafka version: ..."), through the SLF4J binding
 * on the class path.
 */
public final class PlainConsumer {
    private PlainConsumer() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: PlainConsumer <topics> [file.properties|key=value]...");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "earliest");
        for (String arg : Arrays.copyOfRange(args, 1, args.length)) {
            int eq = arg.indexOf('=');
            if (eq > 0 && !new java.io.File(arg).isFile()) {
                props.put(arg.substring(0, eq), arg.substring(eq + 1));
            } else {
                try (InputStream in = new FileInputStream(arg)) {
                    props.load(in);
                }
            }
        }
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();
            try {
                closed.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        System.out.println("started group=" + props.getProperty("group.id") + " protocol="
                + props.getProperty("group.protocol", "classic") + " client.id=" + props.getProperty("client.id"));
        try {
            consumer.subscribe(Arrays.asList(args[0].split(",")));
            while (true) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
                if (!records.isEmpty()) {
                    consumer.commitSync();
                }
            }
        } catch (WakeupException e) {
            // SIGTERM: close below
        } finally {
            consumer.close();
            System.out.println("closed");
            closed.countDown();
        }
    }
}
